"""NVIDIA management library (nvidia-ml-py / pynvml) snapshots: clocks, temperature, power, throttling.

Taken before and after a calibration so a reader can see whether the GPU ran at its
boost clock or was capped by power or temperature. Every function degrades to a dict
with ``available: False`` and a reason when NVML is missing (CPU hosts, AMD GPUs).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from roofline.specs.jsontypes import JsonObject

# clocks-event (throttle) reason bits, nvml.h
_REASONS: dict[int, str] = {
    0x1: "gpu_idle",
    0x2: "applications_clocks_setting",
    0x4: "sw_power_cap",
    0x8: "hw_slowdown",
    0x10: "sync_boost",
    0x20: "sw_thermal_slowdown",
    0x40: "hw_thermal_slowdown",
    0x80: "hw_power_brake_slowdown",
    0x100: "display_clock_setting",
}


def decode_reasons(mask: int) -> list[str]:
    """Names of the set throttle-reason bits of ``mask`` (unknown bits as hex)."""
    names = [name for bit, name in _REASONS.items() if mask & bit]
    rest = mask & ~sum(_REASONS)
    return names + ([hex(rest)] if rest else [])


class NvmlVersions(TypedDict, total=False):
    """Driver versions NVML reports (empty without NVML)."""

    driver: str
    cuda_driver: str


def _pynvml() -> Any:
    import pynvml

    pynvml.nvmlInit()
    return pynvml


def nvml_versions() -> NvmlVersions:
    """Driver and CUDA-driver versions, or an empty dict when NVML is unavailable."""
    try:
        nv = _pynvml()
        cuda = nv.nvmlSystemGetCudaDriverVersion()
        return {"driver": _s(nv.nvmlSystemGetDriverVersion()), "cuda_driver": f"{cuda // 1000}.{cuda % 1000 // 10}"}
    except Exception:
        return {}


def _s(x: Any) -> str:
    return x.decode() if isinstance(x, bytes) else str(x)


def _handle(nv: Any, uuid: str | None, index: int) -> Any:
    if uuid:
        u = uuid if uuid.startswith(("GPU-", "MIG-")) else f"GPU-{uuid}"
        try:
            return nv.nvmlDeviceGetHandleByUUID(u)
        except nv.NVMLError:
            pass
    return nv.nvmlDeviceGetHandleByIndex(index)


def snapshot(uuid: str | None = None, index: int = 0) -> JsonObject:
    """Clocks (MHz), temperature (°C), power (W) and throttle reasons of one GPU right now."""
    try:
        nv = _pynvml()
    except Exception as exc:
        return {"available": False, "reason": f"NVML unavailable: {exc}"}
    out: dict[str, Any] = {"available": True}
    try:
        h = _handle(nv, uuid, index)
    except nv.NVMLError as exc:
        return {"available": False, "reason": f"no NVML handle for the device: {exc}"}
    probes = {
        "sm_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM),
        "mem_clock_mhz": lambda: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_MEM),
        "max_sm_clock_mhz": lambda: nv.nvmlDeviceGetMaxClockInfo(h, nv.NVML_CLOCK_SM),
        "temperature_c": lambda: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU),
        "power_w": lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0,
        "power_limit_w": lambda: nv.nvmlDeviceGetEnforcedPowerLimit(h) / 1000.0,
        "throttle_reasons": lambda: decode_reasons(_reasons_mask(nv, h)),
    }
    for name, probe in probes.items():
        try:
            out[name] = probe()
        except nv.NVMLError as exc:
            out[name] = f"n/a ({exc})"
    return out


def _reasons_mask(nv: Any, h: Any) -> int:
    fn = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return int(fn(h))


def nvml_power_reader(uuid: str | None, index: int) -> Callable[[], float] | None:
    """A function returning the board power (W) of the GPU, or None when NVML is unavailable."""
    try:
        nv = _pynvml()
        h = _handle(nv, uuid, index)
        nv.nvmlDeviceGetPowerUsage(h)
    except Exception:
        return None
    return lambda: nv.nvmlDeviceGetPowerUsage(h) / 1000.0
