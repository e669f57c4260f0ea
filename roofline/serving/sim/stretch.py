"""A run of decode-only steps in closed form: step j costs const + Σ_a max(p_a + q_a·j, u_a + v_a·j).

Built by :meth:`roofline.serving.sim.steptime.StepModel.decode_affine`; the simulator advances whole
stretches between events with :meth:`DecodeStretch.total` and :meth:`DecodeStretch.steps_until`.

The sums are :func:`roofline.evaluate.sum_max_affine_steps` term by term, with the crossing of each term's two
lines worked out once per stretch instead of at every call (the same binary64 operations in the same order, so
the same seconds to the last bit; tests/test_simulate_identical.py).
"""

from __future__ import annotations

import math

#: A crossing beyond any step count: the first line of the term wins at every step.
_NEVER = 1 << 62


def _parts(lines: tuple[tuple[float, float, float, float], ...]) -> tuple[tuple[float, float, float, float, int], ...]:
    """Per term (x1, y1, x2, y2, c0): Σ_{j<k} max(...) = Σ_{j<c} (x1 + y1·j) + Σ_{c≤j<k} (x2 + y2·j), c = min(c0, k),
    as :func:`roofline.evaluate.sum_max_affine_steps` splits it (the lines cross at j0 = (u − p)/(q − v))."""
    out = []
    for p, q, u, v in lines:
        dq = q - v
        if dq == 0.0:
            out.append((p, q, u, v, _NEVER) if p >= u else (u, v, p, q, _NEVER))
            continue
        j0 = (u - p) / dq
        if dq > 0:  # first line wins for j ≥ j0
            out.append((u, v, p, q, max(math.ceil(j0), 0)))
        else:  # first line wins for j ≤ j0
            out.append((p, q, u, v, max(math.floor(j0) + 1, 0)))
    return tuple(out)


class DecodeStretch:
    """Step time d(j) = const + Σ_a max(p_a + q_a·j, u_a + v_a·j) (+ CPU overhead) of decode-only step j.

    ``const_s``, ``cpu_s``: seconds; ``lines``: per attention term (p, q, u, v) in seconds and seconds per step;
    ``async_cpu``: the CPU part overlaps the GPU (step = max(GPU, CPU), :func:`roofline.engine.config.step_seconds`).
    """

    __slots__ = ("_one", "_parts", "async_cpu", "const_s", "cpu_s", "first_s", "lines")

    def __init__(
        self, const_s: float, lines: tuple[tuple[float, float, float, float], ...], cpu_s: float, async_cpu: bool
    ) -> None:
        self.const_s, self.lines, self.cpu_s, self.async_cpu = const_s, lines, cpu_s, async_cpu
        self._parts = _parts(lines)
        # one attention term (most models): its line and its split without a loop, the same operations
        self._one = (lines[0], self._parts[0]) if len(lines) == 1 else None
        self.first_s = self.step(0)  #: seconds of step 0

    def step(self, j: int) -> float:
        """Seconds of step j."""
        one = self._one
        if one is not None:
            p, q, u, v = one[0]
            a, b = p + q * j, u + v * j
            gpu = self.const_s + (a if a > b else b)
        else:
            gpu = self.const_s
            for p, q, u, v in self.lines:
                a, b = p + q * j, u + v * j
                gpu += a if a > b else b
        cpu = self.cpu_s
        if not self.async_cpu:
            return gpu + cpu
        return gpu if gpu > cpu else cpu

    def _gpu_sum(self, k: int) -> float:
        """Σ_{j=0}^{k−1} of the attention terms (s), each by :func:`roofline.evaluate.sum_max_affine_steps`."""
        one = self._one
        if one is not None:
            x1, y1, x2, y2, c0 = one[1]
            c = c0 if c0 < k else k
            n = k - c
            return k * self.const_s + (
                (c * x1 + y1 * (c - 1) * c / 2 if c > 0 else 0.0)
                + (n * x2 + y2 * (c + k - 1) * n / 2 if n > 0 else 0.0)
            )
        gpu = k * self.const_s
        for x1, y1, x2, y2, c0 in self._parts:
            c = c0 if c0 < k else k
            n = k - c
            gpu += (c * x1 + y1 * (c - 1) * c / 2 if c > 0 else 0.0) + (
                n * x2 + y2 * (c + k - 1) * n / 2 if n > 0 else 0.0
            )
        return gpu

    def total(self, k: int) -> float:
        """Σ_{j=0}^{k−1} step(j) in closed form (exact; with async CPU overlap, exact while GPU ≥ CPU)."""
        if k <= 0:
            return 0.0
        if not self.async_cpu:
            return self._gpu_sum(k) + k * self.cpu_s
        if self.step(k - 1) <= self.cpu_s:
            return k * self.cpu_s
        return self._gpu_sum(k) if self.first_s > self.cpu_s else self._mixed_async(k)

    def _mixed_async(self, k: int) -> float:
        """GPU time grows with j: steps before the GPU overtakes the CPU cost take cpu_s each."""
        lo, hi = 0, k - 1  # first j with gpu(j) >= cpu
        while lo < hi:
            mid = (lo + hi) // 2
            if self.step(mid) > self.cpu_s:
                hi = mid
            else:
                lo = mid + 1
        gpu = (k - lo) * self.const_s
        for term in self._parts:
            gpu += _split_sum(term, k) - _split_sum(term, lo)
        return lo * self.cpu_s + gpu

    def steps_until(self, dt: float, k_max: int) -> int:
        """Smallest k ≤ k_max with total(k) ≥ dt (k_max when the stretch ends first)."""
        total = self.total
        if total(k_max) < dt:
            return k_max
        d0 = self.first_s
        hi = min(k_max, max(1, math.ceil(dt / d0)))  # steps only grow: total(hi) ≥ hi·d0 ≥ dt
        lo = max(0, min(hi - 1, int(dt / self.step(hi - 1)) - 1))
        if total(lo) >= dt:
            lo = 0
        while hi - lo > 1:  # invariant: total(lo) < dt <= total(hi)
            mid = (lo + hi) // 2
            if total(mid) >= dt:
                hi = mid
            else:
                lo = mid
        return hi


def _split_sum(term: tuple[float, float, float, float, int], k: int) -> float:
    """One term of :meth:`DecodeStretch._gpu_sum` at k ≥ 0 steps (0 at k = 0)."""
    x1, y1, x2, y2, c0 = term
    c = c0 if c0 < k else k
    n = k - c
    return (c * x1 + y1 * (c - 1) * c / 2 if c > 0 else 0.0) + (n * x2 + y2 * (c + k - 1) * n / 2 if n > 0 else 0.0)
