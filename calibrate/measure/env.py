"""The measuring environment: host CPU, GPU, versions, and the bundled slug of a GPU.

Everything here is recorded in a profile's provenance so a reader can tell which
machine, driver and library produced each number. torch is passed in, never imported
at module level.
"""

from __future__ import annotations

import os
import platform
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import TypedDict

from calibrate.measure.nvml import NvmlVersions, nvml_versions

# torch.cuda.get_device_name -> bundled hardware slug; first match wins (order matters).
_GPU_SLUGS: tuple[tuple[str, str], ...] = (
    (r"GB200", "gb200"),
    (r"B200", "b200"),
    (r"H200 NVL", "h200-nvl"),
    (r"H200", "h200-sxm"),
    (r"H100 NVL", "h100-nvl"),
    (r"H100 PCIe", "h100-pcie"),
    (r"H100 80GB HBM3|H100 SXM|H100-SXM", "h100-sxm"),
    (r"\bH20\b", "h20"),
    (r"A100-SXM4-80GB|A100 SXM4 80GB", "a100-80gb-sxm"),
    (r"A100-SXM4-40GB|A100 SXM4 40GB", "a100-40gb-sxm"),
    (r"A100 80GB PCIe|A100-PCIE-80GB", "a100-80gb-pcie"),
    (r"L40S", "l40s"),
    (r"\bL4\b", "l4"),
    (r"RTX 4090", "rtx-4090"),
    (r"MI325X", "mi325x"),
    (r"MI300X", "mi300x"),
)


def gpu_slug(device_name: str) -> str | None:
    """Bundled hardware slug for a ``torch.cuda.get_device_name`` string, or None.

    >>> gpu_slug("NVIDIA H200"), gpu_slug("NVIDIA H100 80GB HBM3")
    ('h200-sxm', 'h100-sxm')
    """
    for pattern, slug in _GPU_SLUGS:
        if re.search(pattern, device_name):
            return slug
    return None


def slugify(text: str) -> str:
    """Lowercase slug accepted by HardwareSpec.name: ``"NVIDIA GeForce RTX 3090"`` -> ``nvidia-geforce-rtx-3090``."""
    s = re.sub(r"[^a-z0-9.]+", "-", text.lower()).strip("-.")
    return s or "unknown-device"


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def meminfo_bytes(field: str) -> int | None:
    """A /proc/meminfo field (e.g. MemTotal, MemAvailable) in bytes, None when unavailable."""
    m = re.search(rf"^{field}:\s+(\d+)\s*kB", _read("/proc/meminfo"), re.MULTILINE)
    return int(m.group(1)) * 1024 if m else None


class CpuInfo(TypedDict):
    """The host CPU and memory (:func:`cpu_info`); None where the OS does not say."""

    model_name: str
    vendor: str
    logical_cpus: int | None
    llc_bytes: int
    mem_total_bytes: int | None
    mem_available_bytes: int | None
    loadavg: list[str]


class Versions(TypedDict):
    """Versions of the software that measured (:func:`versions`)."""

    python: str
    platform: str
    torch: str
    cuda: str | None
    hip: str | None
    cudnn: int | None
    numpy: str
    roofline: str


class GpuInfo(NvmlVersions):
    """One CUDA device (:func:`gpu_info`), with the driver versions NVML reports."""

    name: str
    capability: str
    total_memory_bytes: int
    multiprocessors: int
    l2_cache_bytes: int | None
    uuid: str | None
    index: int
    cuda_visible_devices: str | None


class ThreadInfo(TypedDict):
    """torch's threads and the environment that sets them (:func:`thread_info`)."""

    torch_threads: int
    torch_interop_threads: int
    OMP_NUM_THREADS: str | None
    MKL_NUM_THREADS: str | None


def cpu_info() -> CpuInfo:
    """Model name, vendor, logical CPUs, last-level cache and memory of this host."""
    text = _read("/proc/cpuinfo")

    def field(name: str) -> str | None:
        m = re.search(rf"^{name}\s*:\s*(.+)$", text, re.MULTILINE)
        return m.group(1).strip() if m else None

    vendor_id = field("vendor_id") or platform.processor() or "unknown"
    vendor = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(vendor_id, vendor_id)
    model = field("model name") or field("Model") or platform.processor() or platform.machine()
    return {
        "model_name": model,
        "vendor": vendor,
        "logical_cpus": os.cpu_count(),
        "llc_bytes": last_level_cache_bytes(),
        "mem_total_bytes": meminfo_bytes("MemTotal"),
        "mem_available_bytes": meminfo_bytes("MemAvailable"),
        "loadavg": _read("/proc/loadavg").split()[:3],
    }


def last_level_cache_bytes(default: int = 32 * 2**20) -> int:
    """Size of the highest-level CPU cache from sysfs (bytes); ``default`` when unknown."""
    best_level, best = -1, 0
    base = Path("/sys/devices/system/cpu/cpu0/cache")
    for idx in sorted(base.glob("index*")) if base.is_dir() else []:
        level = _read(str(idx / "level")).strip()
        size = _read(str(idx / "size")).strip()
        m = re.fullmatch(r"(\d+)([KMG]?)", size)
        if not level.isdigit() or not m:
            continue
        n = int(m.group(1)) * {"": 1, "K": 2**10, "M": 2**20, "G": 2**30}[m.group(2)]
        if int(level) > best_level or (int(level) == best_level and n > best):
            best_level, best = int(level), n
    return best or default


def versions(torch: ModuleType) -> Versions:
    """Python, torch, CUDA/ROCm, cuDNN, numpy and roofline versions."""
    import numpy as np

    import roofline

    cuda = getattr(torch.version, "cuda", None)
    hip = getattr(torch.version, "hip", None)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "torch": torch.__version__,
        "cuda": cuda,
        "hip": hip,
        "cudnn": cudnn,
        "numpy": np.__version__,
        "roofline": roofline.__version__,
    }


def gpu_info(torch: ModuleType, index: int) -> GpuInfo:
    """Name, compute capability, memory, SMs, L2 size and UUID of CUDA device ``index``."""
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    info: GpuInfo = {
        "name": torch.cuda.get_device_name(index),
        "capability": f"{props.major}.{props.minor}",
        "total_memory_bytes": int(props.total_memory),
        "multiprocessors": int(getattr(props, "multi_processor_count", 0)),
        "l2_cache_bytes": int(getattr(props, "L2_cache_size", 0)) or None,
        "uuid": str(uuid) if uuid is not None else None,
        "index": index,
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    info.update(nvml_versions())
    return info


def thread_info(torch: ModuleType) -> ThreadInfo:
    """torch intra/inter-op threads and the OMP/MKL environment that affects them."""
    return {
        "torch_threads": torch.get_num_threads(),
        "torch_interop_threads": torch.get_num_interop_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "MKL_NUM_THREADS": os.environ.get("MKL_NUM_THREADS"),
    }
