"""Which measured evidence a calibration profile's numbers rest on, device by device.

One rule for every device: a correction measured on one GPU is applied by the same rule everywhere, or the device
says which evidence it rests on. :func:`device_evidence` states, for a hardware spec, one sentence per part of the
profile that decides its op times: the ceilings (measured on this device, or a fraction of its datasheet peaks
fitted on public microbenchmarks, with any vendor factor), and each device-scoped correction (the GEMM rate
against K, the MoE grouped-GEMM rates) with the device it was measured on and whether it applies here. ``predict``,
``simulate`` and the report show these sentences next to their numbers, with one on how many public measurements
of the device roofline is validated against (none, for most devices: say so rather than imply it).
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from roofline.profile import CalibrationProfile, GemmK, GroupedGemm
from roofline.specs.hardware import HardwareSpec

if TYPE_CHECKING:
    from roofline.specs.model import ModelSpec
    from roofline.specs.scenario import Scenario

VALIDATION_PATH = Path(__file__).resolve().parent / "data" / "device_validation.yaml"


@functools.cache
def device_validation() -> dict[str, dict[str, int]]:
    """{hardware: {source: public measurements}} (``roofline/data/device_validation.yaml``, written by
    :mod:`roofline.published.device_coverage` from the validation sets)."""
    import yaml

    data = yaml.safe_load(VALIDATION_PATH.read_text(encoding="utf-8"))
    return {str(k): {str(s): int(n) for s, n in v.items()} for k, v in (data or {}).items()}


def validation_sentence(hardware: str) -> str:
    """What public measurements of ``hardware`` roofline's accuracy is measured on, or that there are none."""
    cov = device_validation()
    mine = cov.get(hardware)
    if mine:
        parts = ", ".join(f"{n:,} {src}" for src, n in mine.items())
        return f"validated on {hardware}: {sum(mine.values()):,} public measurements ({parts})"
    measured = ", ".join(sorted(cov))
    return (
        f"validated on {hardware}: no public measurement of this device is in roofline's validation sets "
        f"(they measure {measured}); its numbers rest on its datasheet and the rules fitted there, unvalidated here"
    )


def device_evidence(
    profile: CalibrationProfile, hw: HardwareSpec, moe: bool = False, moe_shape: str = ""
) -> tuple[str, ...]:
    """One sentence per part of ``profile`` that prices ops on ``hw`` (``moe``: include the grouped-GEMM rates, and
    with ``moe_shape``, the scenario's :func:`roofline.ops.ffn.moe_layer_shape`, whether a table measured that exact
    layer), and one on the public measurements of ``hw`` roofline is validated against (:func:`validation_sentence`)."""
    out = [_ceilings(profile, hw), validation_sentence(hw.name)]
    if profile.gemm_k.devices:
        out.append(_scoped("GEMM rate against K", profile.gemm_k, hw, "dense GEMMs at its ceilings at every K"))
    if moe:
        gg = profile.grouped_gemm
        if gg.devices:
            out.append(_scoped("MoE grouped GEMM", gg, hw, "routed experts priced as dense GEMMs at its ceilings"))
        else:
            out.append("MoE grouped GEMM: no measurement in this profile; routed experts priced as dense GEMMs")
        if moe_shape and gg.layers and hw.name in gg.devices:
            out.append(_layer_sentence(gg, moe_shape))
    return tuple(out)


def scenario_evidence(
    profile: CalibrationProfile, hw: HardwareSpec, model: ModelSpec, scenario: Scenario
) -> tuple[str, ...]:
    """:func:`device_evidence` of one scenario: with a MoE model, its layer shape on one GPU of ``scenario``
    (:func:`roofline.ops.ffn.moe_layer_shape`) says whether the profile holds that layer's measured seconds."""
    from roofline.ops.ffn import moe_layer_shape

    moe = model.moe is not None
    return device_evidence(profile, hw, moe=moe, moe_shape=moe_layer_shape(model, scenario) if moe else "")


def _layer_sentence(gg: GroupedGemm, shape: str) -> str:
    """Whether ``shape``'s own kernel seconds are in the profile's measured layers, and in which kernel formats."""
    formats = sorted(k.split("|", 1)[0] for k in gg.layers if k.endswith(f"|{shape}"))
    if formats:
        return (
            f"MoE layer {shape}: its own kernel seconds measured on {gg.measured_on} ({', '.join(formats)} kernels), "
            "the routed experts of those formats priced at them"
        )
    return (
        f"MoE layer {shape}: this profile holds no measured layer of this shape; routed experts priced at the "
        "grouped curves"
    )


def _engine_kernels(profile: CalibrationProfile, hw: HardwareSpec) -> str:
    """The sentence of a profile fitted to an engine's kernel tables (``provenance.kind`` aiconfigurator)."""
    prov = profile.provenance
    measured_on, engine = prov.get("hardware", "?"), prov.get("engine", "?")
    versions = sorted({str(r["table"]).split("/")[3] for r in _fit_records(prov.get("fits", {}))})
    where = f"measured on {measured_on}" if measured_on == hw.name else f"measured on {measured_on}, borrowed"
    kept = f"; kept from the default profile: {len(prov.get('kept', []))} part(s)" if prov.get("kept") else ""
    return (
        f"ceilings and kernel costs: fitted to {engine} {', '.join(versions)} kernels {where} "
        f"({prov.get('source', 'aiconfigurator')} tables; profile {profile.name}){kept}"
    )


def _fit_records(fits: dict[str, object]) -> list[dict[str, object]]:
    out: list[dict[str, object]] = []
    for rec in fits.values():
        if isinstance(rec, dict) and "table" in rec:
            out.append(rec)
        elif isinstance(rec, dict):
            out += [r for r in rec.values() if isinstance(r, dict) and "table" in r]
    return out


def _ceilings(profile: CalibrationProfile, hw: HardwareSpec) -> str:
    if profile.provenance.get("kind") == "aiconfigurator":
        return _engine_kernels(profile, hw)
    if profile.device is not None and profile.device == hw.name:
        return f"ceilings: measured on {hw.name} (profile {profile.name})"
    bf16 = profile.compute.get("bf16")
    eff = f"{bf16.efficiency:.3g} of the bf16 peak" if bf16 is not None and bf16.efficiency is not None else ""
    vendor = profile.vendor_compute_efficiency.get(hw.vendor)
    if vendor:
        eff = f"{min(vendor.values()):.3g} of the compute peaks (the factor fitted for {hw.vendor} devices)"
    kind = profile.provenance.get("kind", "no stated provenance")
    tables = "" if profile.name != "default" else " (no engine-kernel tables for this device and engine)"
    return (
        f"ceilings: {eff} and {profile.memory.efficiency or 1:.3g} of the HBM bandwidth of {hw.name}'s datasheet, "
        f"the fractions profile {profile.name} ({kind}) applies to every device"
        + (f" of {hw.vendor}" if vendor else "")
        + tables
    )


def _scoped(label: str, corr: GemmK | GroupedGemm, hw: HardwareSpec, otherwise: str) -> str:
    where = corr.measured_on or "an unnamed device"
    if hw.name in corr.devices:
        same = "" if hw.name == where else f" (same SM as {where})"
        return f"{label}: measured on {where}, applied to {hw.name}{same}"
    return f"{label}: measured on {where} only, not applied to {hw.name} (no measurement on its SM): {otherwise}"
