"""Board power during a calibration: NVML samples while a suite runs (energy per token in the planner).

:class:`PowerSampler` reads ``nvmlDeviceGetPowerUsage`` (mW, the board's instantaneous or 1 s-averaged draw
depending on the GPU) every ``period_s`` on a background thread between ``start`` and ``stop`` and keeps the
samples; :func:`board_power` turns the idle reading taken before the suites (CUDA context up, no kernel
running: ``nvml_before``) and the samples of the GEMM suite (compute-bound, the upper end) into the profile's
:class:`roofline.profile.BoardPower`. Without NVML (CPU hosts, AMD GPUs) nothing is sampled and the profile has
no ``power``: the planner then uses the TDP rule and says so.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from roofline.profile import BoardPower


class PowerSampler:
    """Samples ``read_w()`` (watts) every ``period_s`` on a thread between :meth:`start` and :meth:`stop`."""

    def __init__(self, read_w: Callable[[], float], period_s: float = 0.02) -> None:
        self.read_w, self.period_s = read_w, period_s
        self.samples: list[float] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def run(self) -> None:
        """Sample until :meth:`request_stop` (what the background thread runs; callable directly)."""
        while not self._stop.is_set():
            with contextlib.suppress(Exception):  # a failed read (driver hiccup) drops that sample only
                self.samples.append(float(self.read_w()))
            self._stop.wait(self.period_s)

    def request_stop(self) -> None:
        """Make :meth:`run` return after the read in progress."""
        self._stop.set()

    def start(self) -> None:
        """Begin sampling on a background thread (idempotent)."""
        if self._thread is None:
            self._stop.clear()
            self._thread = threading.Thread(target=self.run, name="nvml-power", daemon=True)
            self._thread.start()

    def stop(self) -> list[float]:
        """Stop sampling and return every sample taken so far (W)."""
        self.request_stop()
        if self._thread is not None:
            self._thread.join(timeout=1.0)
            self._thread = None
        return list(self.samples)


def board_power(idle_snapshot: dict[str, Any] | None, busy_samples: list[float]) -> BoardPower | None:
    """The profile's board power: idle from the pre-suite NVML snapshot (``power_w``), busy the mean of the
    GEMM suite's samples; None unless both exist and busy ≥ idle > 0 (a reading that cannot be a draw)."""
    from roofline.profile import BoardPower

    idle = (idle_snapshot or {}).get("power_w")
    if not isinstance(idle, int | float) or idle <= 0 or not busy_samples:
        return None
    busy = sum(busy_samples) / len(busy_samples)
    if busy < idle:
        return None
    return BoardPower(idle_watts=float(idle), busy_watts=float(busy), samples=len(busy_samples))
