"""A HardwareSpec back to its YAML form, units written explicitly (how a measured profile embeds its device)."""

from __future__ import annotations

from typing import Any

from roofline.specs.hardware import HardwareSpec


def hardware_to_yaml_dict(hw: HardwareSpec) -> dict[str, Any]:
    """HardwareSpec back to its YAML form (units written explicitly)."""
    d: dict[str, Any] = {
        "name": hw.name,
        "display_name": hw.display_name,
        "vendor": hw.vendor,
        "form_factor": hw.form_factor,
        "memory": {
            "capacity": f"{hw.memory.capacity_bytes!r} B",
            "bandwidth": f"{hw.memory.bandwidth_bytes_per_s!r} B/s",
        },
        "peak_dense": {k: f"{v!r} FLOPS" for k, v in hw.peak_dense.model_dump().items() if v is not None},
        "sources": [s.model_dump() for s in hw.sources],
        "notes": hw.notes,
    }
    if hw.memory.visible_capacity_bytes is not None:
        d["memory"]["visible_capacity"] = f"{hw.memory.visible_capacity_bytes!r} B"
    if hw.l2_cache_bytes:
        d["l2_cache"] = f"{hw.l2_cache_bytes!r} B"
    for key, link in (("interconnect", hw.interconnect), ("fallback", hw.fallback)):
        if link is not None:
            ld = link.model_dump(mode="json", by_alias=True, exclude_none=True)
            for k, v in list(ld.items()):
                if k.startswith("bandwidth") or k.startswith("per_peer"):
                    ld[k] = f"{v!r} B/s"
                elif k == "latency":
                    ld[k] = f"{v!r} s"
            d[key] = ld
    d["host_size"] = hw.host_size
    if hw.scale_out_bandwidth_per_direction_bytes_per_s is not None:
        d["scale_out_bandwidth_per_direction"] = f"{hw.scale_out_bandwidth_per_direction_bytes_per_s!r} B/s"
    return d
