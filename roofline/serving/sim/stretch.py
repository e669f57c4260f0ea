"""A run of decode-only steps in closed form: step j costs const + Σ_a max(p_a + q_a·j, u_a + v_a·j).

Built by :meth:`roofline.serving.sim.steptime.StepModel.decode_affine`; the simulator advances whole
stretches between events with :meth:`DecodeStretch.total` and :meth:`DecodeStretch.steps_until`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from roofline.engine.config import step_seconds
from roofline.evaluate import sum_max_affine_steps as sum_max_affine


@dataclass(frozen=True)
class DecodeStretch:
    """Step time d(j) = const + Σ_a max(p_a + q_a·j, u_a + v_a·j) (+ CPU overhead) of decode-only step j."""

    const_s: float
    lines: tuple[tuple[float, float, float, float], ...]
    cpu_s: float
    async_cpu: bool

    def step(self, j: int) -> float:
        """Seconds of step j."""
        gpu = self.const_s
        for p, q, u, v in self.lines:
            a, b = p + q * j, u + v * j
            gpu += a if a > b else b
        return step_seconds(gpu, self.cpu_s, self.async_cpu)

    def total(self, k: int) -> float:
        """Σ_{j=0}^{k−1} step(j) in closed form (exact; with async CPU overlap, exact while GPU ≥ CPU)."""
        if k <= 0:
            return 0.0
        if self.async_cpu and self.step(k - 1) <= self.cpu_s:
            return k * self.cpu_s
        gpu = k * self.const_s
        for p, q, u, v in self.lines:
            gpu += sum_max_affine(p, q, u, v, k)
        if self.async_cpu:
            return gpu if self.step(0) > self.cpu_s else self._mixed_async(k)
        return gpu + k * self.cpu_s

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
        for p, q, u, v in self.lines:
            gpu += sum_max_affine(p, q, u, v, k) - sum_max_affine(p, q, u, v, lo)
        return lo * self.cpu_s + gpu

    def steps_until(self, dt: float, k_max: int) -> int:
        """Smallest k ≤ k_max with total(k) ≥ dt (k_max when the stretch ends first)."""
        if self.total(k_max) < dt:
            return k_max
        d0 = self.step(0)
        hi = min(k_max, max(1, math.ceil(dt / d0)))  # steps only grow: total(hi) ≥ hi·d0 ≥ dt
        lo = max(0, min(hi - 1, int(dt / self.step(hi - 1)) - 1))
        if self.total(lo) >= dt:
            lo = 0
        while hi - lo > 1:  # invariant: total(lo) < dt <= total(hi)
            mid = (lo + hi) // 2
            if self.total(mid) >= dt:
                hi = mid
            else:
                lo = mid
        return hi
