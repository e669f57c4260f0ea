"""The device under test: resolving ``--device``, its datasheet spec, pool size and sanity limits."""

from __future__ import annotations

import re
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING

from calibrate.measure.context import World
from calibrate.measure.env import gpu_slug, slugify
from roofline.errors import CalibrationError, UnknownNameError
from roofline.specs.hardware import HardwareSpec

if TYPE_CHECKING:
    import torch

GiB, MiB = 2**30, 2**20


@dataclass(frozen=True)
class Target:
    """Resolved device: torch device, label used as the profile's ``device`` and the datasheet spec."""

    device: torch.device
    is_cuda: bool
    index: int
    name: str
    label: str
    datasheet: HardwareSpec | None
    note: str = ""


def resolve(torch: ModuleType, spec: str, world: World) -> Target:
    """``cpu``, ``cuda`` or ``cuda:N`` -> Target; a missing GPU raises CalibrationError with the fix."""
    text = spec.strip().lower()
    if text == "cpu":
        return Target(torch.device("cpu"), False, 0, "cpu", "host-cpu", None)
    m = re.fullmatch(r"(cuda|gpu)(?::(\d+))?", text)
    if not m:
        raise CalibrationError(f"unknown device '{spec}'; use --device cpu or --device cuda[:N]")
    if not torch.cuda.is_available():
        why = (
            f"this torch ({torch.__version__}) was built without CUDA"
            if torch.version.cuda is None and not getattr(torch.version, "hip", None)
            else "torch sees no GPU (check the driver, `nvidia-smi` and CUDA_VISIBLE_DEVICES)"
        )
        raise CalibrationError(f"no CUDA device; use --device cpu ({why})")
    index = world.local_rank if world.size > 1 else int(m.group(2) or 0)
    count = torch.cuda.device_count()
    if index >= count:
        raise CalibrationError(f"cuda:{index} does not exist: torch sees {count} GPU(s); use cuda:0 … cuda:{count - 1}")
    name = torch.cuda.get_device_name(index)
    slug = gpu_slug(name)
    hw, note = None, ""
    if slug is not None:
        import roofline

        try:
            hw = roofline.hardware(slug)
        except UnknownNameError:
            note = f"'{name}' looks like {slug}, which has no bundled spec; peaks below are measured bests"
    else:
        note = f"'{name}' is not a bundled device; peaks below are measured bests, not datasheet values"
    label = hw.name if hw is not None else slugify(name)
    return Target(torch.device("cuda", index), True, index, name, label, hw, note)


def pool_bytes(torch: ModuleType, t: Target, llc: int, mem_available: int | None) -> int:
    """Rotating-pool size: CPU max(3·LLC, 512 MiB), GPU max(16·L2, 2 GiB); at most a quarter of free memory."""
    if t.is_cuda:
        free, _ = torch.cuda.mem_get_info(t.index)
        return int(min(max(16 * llc, 2 * GiB), free // 4))
    want = max(3 * llc, 512 * MiB)
    cap = mem_available // 4 if mem_available else 1 * GiB
    return int(min(want, cap, 4 * GiB))


def limits(t: Target, threads: int) -> tuple[dict[str, float], float]:
    """(plausible FLOP/s per dtype, plausible bytes/s): 2× the datasheet compute and 10× its bandwidth
    on a known GPU (caches beat HBM), generous per-thread bounds on a CPU."""
    hw = t.datasheet
    if hw is not None:
        flops = {d: 2 * (hw.peak_flops_per_s(d) or 5e15) for d in ("fp32", "tf32", "bf16", "fp16", "fp8", "int8")}
        return flops, 10 * hw.memory.bandwidth_bytes_per_s
    if t.is_cuda:
        return dict.fromkeys(("fp32", "tf32", "bf16", "fp16", "fp8", "int8"), 1e17), 1e14
    return dict.fromkeys(("fp32", "tf32", "bf16", "fp16", "fp8", "int8"), 5e12 * threads), 1e12 * threads


def initial_rates(t: Target, threads: int) -> dict[str, float]:
    """Guessed rates that size the first cases before anything is measured."""
    hw = t.datasheet
    if hw is not None:
        rates = {f"flops:{d}": 0.6 * (hw.peak_flops_per_s(d) or 1e13) for d in ("fp32", "tf32", "bf16", "fp16")}
        rates.update({f"flops:{d}": 0.6 * (hw.peak_flops_per_s(d) or 1e13) for d in ("fp8", "int8")})
        return {**rates, "bytes": 0.8 * hw.memory.bandwidth_bytes_per_s, "comm": 1e11}
    if t.is_cuda:
        return {"flops:default": 5e13, "bytes": 1e12, "comm": 5e10}
    return {
        "flops:fp32": 8e10 * threads,
        "flops:bf16": 2e11 * threads,
        "flops:default": 5e10 * threads,
        "bytes": 1e10,
        "comm": 1e9,
    }
