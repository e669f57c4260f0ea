"""A run of decode-only steps in closed form: step j costs const + Σ_a max(p_a + q_a·j, u_a + v_a·j).

Built by :meth:`roofline.serving.sim.steptime.StepModel.decode_affine`; the simulator advances whole
stretches between events with :meth:`DecodeStretch.total` and :meth:`DecodeStretch.steps_until`.

The sums are :func:`roofline.evaluate.sum_max_affine_steps` term by term, with the crossing of each term's two
lines worked out once per stretch instead of at every call (the same binary64 operations in the same order, so
the same seconds to the last bit; tests/test_simulate_identical.py).
"""

from __future__ import annotations

import math
from collections.abc import Callable

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


class _Bisected:
    """The search both stretch kinds share: the fewest steps whose total reaches a time, by bisection on
    ``total(k)`` (steps never shrink, so total is increasing and step(k − 1) bounds the mean step)."""

    __slots__ = ()
    first_s: float

    def total(self, k: int) -> float:
        raise NotImplementedError

    def step(self, j: int) -> float:
        raise NotImplementedError

    def steps_until(self, dt: float, k_max: int) -> int:
        """Smallest k ≤ k_max with total(k) ≥ dt (k_max when the stretch ends first)."""
        return k_max if self.total(k_max) < dt else self.search(dt, k_max)[0]

    def search(self, dt: float, k_max: int) -> tuple[int, float]:
        """:meth:`steps_until` where total(k_max) ≥ dt: the smallest such k, by bisection, and total(k) (s)."""
        total = self.total
        d0 = self.first_s
        hi = min(k_max, max(1, math.ceil(dt / d0)))  # steps only grow: total(hi) ≥ hi·d0 ≥ dt
        lo = max(0, min(hi - 1, int(dt / self.step(hi - 1)) - 1))
        if total(lo) >= dt:
            lo = 0
        t_hi = -1.0  # total(hi) once computed (totals are ≥ 0)
        while hi - lo > 1:  # invariant: total(lo) < dt <= total(hi)
            mid = (lo + hi) // 2
            t = total(mid)
            if t >= dt:
                hi, t_hi = mid, t
            else:
                lo = mid
        return hi, (t_hi if t_hi >= 0.0 else total(hi))


class DecodeStretch(_Bisected):
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

    def _first_gpu_bound(self, k: int) -> int:
        """The first step j < k whose GPU time exceeds the CPU cost (steps only grow), by bisection."""
        return _first_over(self.step, self.cpu_s, k)

    def _mixed_async(self, k: int) -> float:
        """GPU time grows with j: steps before the GPU overtakes the CPU cost take cpu_s each."""
        lo = self._first_gpu_bound(k)
        gpu = (k - lo) * self.const_s
        for term in self._parts:
            gpu += _split_sum(term, k) - _split_sum(term, lo)
        return lo * self.cpu_s + gpu


def _first_over(seconds: Callable[[int], float], threshold: float, k: int) -> int:
    """The first j in 0 … k − 1 with seconds(j) > threshold, for seconds non-decreasing in j, by bisection
    (k − 1 when none is: callers that need to know check seconds(k − 1) first)."""
    lo, hi = 0, k - 1
    while lo < hi:
        mid = (lo + hi) // 2
        if seconds(mid) > threshold:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _split_sum(term: tuple[float, float, float, float, int], k: int) -> float:
    """One term of :meth:`DecodeStretch._gpu_sum` at k ≥ 0 steps (0 at k = 0)."""
    x1, y1, x2, y2, c0 = term
    c = c0 if c0 < k else k
    n = k - c
    return (c * x1 + y1 * (c - 1) * c / 2 if c > 0 else 0.0) + (n * x2 + y2 * (c + k - 1) * n / 2 if n > 0 else 0.0)


class LineStretch(_Bisected):
    """:class:`DecodeStretch` of one attention term (most models) with the CPU part added (no asynchronous overlap).

    Step j costs const + max(p + q·j, u + v·j) + cpu; the methods are DecodeStretch's for one line, written out
    (the same binary64 operations in the same order, so the same seconds to the last bit) and without its
    per-term loops, tuples and indirections: the simulator builds one per decode stretch.
    """

    __slots__ = ("c0", "const_s", "cpu_s", "first_s", "p", "q", "u", "v", "x1", "x2", "y1", "y2")

    def __init__(self, const_s: float, p: float, q: float, u: float, v: float, cpu_s: float) -> None:
        self.const_s, self.cpu_s, self.p, self.q, self.u, self.v = const_s, cpu_s, p, q, u, v
        dq = q - v  # _parts of the one line
        if dq == 0.0:
            if p >= u:
                self.x1, self.y1, self.x2, self.y2, self.c0 = p, q, u, v, _NEVER
            else:
                self.x1, self.y1, self.x2, self.y2, self.c0 = u, v, p, q, _NEVER
        elif dq > 0:
            j0 = (u - p) / dq
            c0 = math.ceil(j0)
            self.x1, self.y1, self.x2, self.y2, self.c0 = u, v, p, q, (c0 if c0 > 0 else 0)
        else:
            j0 = (u - p) / dq
            c0 = math.floor(j0) + 1
            self.x1, self.y1, self.x2, self.y2, self.c0 = p, q, u, v, (c0 if c0 > 0 else 0)
        a, b = p + q * 0, u + v * 0
        self.first_s = (const_s + (a if a > b else b)) + cpu_s  #: seconds of step 0

    def step(self, j: int) -> float:
        """Seconds of step j."""
        a, b = self.p + self.q * j, self.u + self.v * j
        return (self.const_s + (a if a > b else b)) + self.cpu_s

    def total(self, k: int) -> float:
        """Σ_{j=0}^{k−1} step(j) in closed form (:meth:`DecodeStretch.total`)."""
        if k <= 0:
            return 0.0
        c0 = self.c0
        c = c0 if c0 < k else k
        n = k - c
        return (
            k * self.const_s
            + (
                (c * self.x1 + self.y1 * (c - 1) * c / 2 if c > 0 else 0.0)
                + (n * self.x2 + self.y2 * (c + k - 1) * n / 2 if n > 0 else 0.0)
            )
        ) + k * self.cpu_s


def line_steps(
    const_s: float, p: float, q: float, u: float, v: float, cpu_s: float, dt: float, k_max: int
) -> tuple[int, float, float, float, float]:
    """A one-line stretch (:class:`LineStretch` of these coefficients, k_max ≥ 1) run until its steps reach ``dt``
    seconds: (k = ``steps_until(dt, k_max)``, ``total(k)``, ``step(0)``, ``step(1)`` when k > 2 else
    ``step(k − 1)``, ``step(k − 1)`` when k > 1 else ``step(0)``), the same seconds to the last bit; the object is
    built only when the steps reach ``dt`` before k_max (``dt`` = inf: all k_max steps). The simulator's hot path:
    one call a decode stretch."""
    dq = q - v  # LineStretch.__init__'s split
    if dq == 0.0:
        x1, y1, x2, y2, c0 = (p, q, u, v, _NEVER) if p >= u else (u, v, p, q, _NEVER)
    elif dq > 0:
        c0 = math.ceil((u - p) / dq)
        x1, y1, x2, y2, c0 = u, v, p, q, (c0 if c0 > 0 else 0)
    else:
        c0 = math.floor((u - p) / dq) + 1
        x1, y1, x2, y2, c0 = p, q, u, v, (c0 if c0 > 0 else 0)
    a, b = p + q * 0, u + v * 0
    d0 = (const_s + (a if a > b else b)) + cpu_s  # step(0)
    k, c = k_max, (c0 if c0 < k_max else k_max)  # total(k_max)
    n = k - c
    tot = (
        k * const_s
        + ((c * x1 + y1 * (c - 1) * c / 2 if c > 0 else 0.0) + (n * x2 + y2 * (c + k - 1) * n / 2 if n > 0 else 0.0))
    ) + k * cpu_s
    if not tot < dt:  # the steps reach dt first: LineStretch.steps_until's search
        k, tot = LineStretch(const_s, p, q, u, v, cpu_s).search(dt, k_max)
    if k < 2:
        return k, tot, d0, d0, d0
    j = k - 1
    a, b = p + q * j, u + v * j
    last = (const_s + (a if a > b else b)) + cpu_s  # step(k − 1)
    if k < 3:
        return k, tot, d0, last, last
    a, b = p + q * 1, u + v * 1
    return k, tot, d0, (const_s + (a if a > b else b)) + cpu_s, last


#: What :meth:`roofline.serving.sim.steptime.StepModel.decode_affine` returns: the same methods either way.
Stretch = DecodeStretch | LineStretch


class FlooredStretch(DecodeStretch):
    """A :class:`DecodeStretch` whose GPU time has a floor f (seconds: the per-step overhead + the host's run-ahead
    launch seconds of these eager steps, :func:`roofline.costs.with_launch_floor`): step j's GPU time is
    max(g_j, f), g_j = const + Σ_a max(p_a + q_a·j, u_a + v_a·j), with the engine's CPU part joined as in the plain
    stretch. g_j does not fall with j, so the steps sit on the floor for j < J (the first step with g_J > f) and on
    their lines from there: Σ_{j<k} max(g_j, f) = min(J, k)·f + Σ_{J≤j<k} g_j. Under asynchronous CPU overlap a CPU
    part c above f is the binding floor instead (max(g_j, f, c)), which the plain stretch's crossing gives.
    """

    __slots__ = ("floor_s",)

    def __init__(
        self,
        const_s: float,
        lines: tuple[tuple[float, float, float, float], ...],
        floor_s: float,
        cpu_s: float,
        async_cpu: bool,
    ) -> None:
        self.floor_s = floor_s
        super().__init__(const_s, lines, cpu_s, async_cpu)

    def _raw(self, j: int) -> float:
        """g_j: the GPU seconds of step j without the floor."""
        gpu = self.const_s
        for p, q, u, v in self.lines:
            a, b = p + q * j, u + v * j
            gpu += a if a > b else b
        return gpu

    def step(self, j: int) -> float:
        """Seconds of step j."""
        g, f = self._raw(j), self.floor_s
        gpu = g if g > f else f
        cpu = self.cpu_s
        if not self.async_cpu:
            return gpu + cpu
        return gpu if gpu > cpu else cpu

    def total(self, k: int) -> float:
        """Σ_{j=0}^{k−1} step(j) in closed form (exact: the steps on the floor, then on their lines)."""
        if k <= 0:
            return 0.0
        if self.async_cpu and self.cpu_s >= self.floor_s:  # the CPU part binds before the host's floor
            return super().total(k)
        lo = self._first_above(k)
        gpu = lo * self.floor_s + (self._gpu_sum(k) - self._gpu_sum(lo) if lo < k else 0.0)
        return gpu if self.async_cpu else gpu + k * self.cpu_s

    def _first_above(self, k: int) -> int:
        """The first step j < k whose raw GPU time exceeds the floor (k if none), by bisection (g_j only grows)."""
        if self._raw(k - 1) <= self.floor_s:
            return k
        return _first_over(self._raw, self.floor_s, k)
