"""Checkpoint precision per module group, read from a Hugging Face ``quantization_config``.

Module groups: ``attention`` (Q/K/V/O and MLA projections), ``dense_ffn``, ``routed_experts``,
``shared_experts``, ``embeddings`` (input embedding and lm_head). Norm vectors and MoE routers
always stay 16-bit (:data:`roofline.memory.NORM_BYTES`).

:func:`checkpoint_from_quantization_config` maps the formats engines load:

* ``quant_method: fp8`` with ``weight_block_size`` → ``fp8-block`` on every linear layer,
  embeddings/lm_head 16-bit (DeepSeek-V3/R1: ``fmt e4m3``, ``[128, 128]``); without a block
  size → per-tensor ``fp8``.
* ``quant_method: mxfp4`` → ``mxfp4`` on the modules not listed in ``modules_to_not_convert``
  (gpt-oss: attention, router, embeddings and lm_head stay bf16, so only the experts are MXFP4).
* ``quant_method: awq`` / ``gptq`` with ``bits: 4``, ``group_size: 128`` → ``int4-g128`` on every
  linear layer (other group sizes are rejected with the formats we know).
* ``quant_method: modelopt`` with ``quant_algo`` NVFP4 / FP8 / W4A16_AWQ → ``nvfp4`` / ``fp8`` /
  ``int4-g128`` (``MIXED_PRECISION``: each group's most common ``quantized_layers`` algo);
  ``compressed-tensors`` from its first ``config_groups`` weights (float 4-bit group 16 →
  ``nvfp4``, group 32 → ``mxfp4``, float 8-bit → ``fp8`` or ``fp8-block``, int 4-bit group 32 symmetric →
  ``int4-g32``, int 4-bit group 128 asymmetric → ``int4-g128``). Their ``ignore`` lists keep
  groups in bf16 (Kimi-K2.5: attention, shared experts and dense FFN; only routed experts int4).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import Field, field_validator

from roofline.errors import SpecError
from roofline.specs._base import Frozen
from roofline.specs.precision import Precision

MODULE_GROUPS = ("attention", "dense_ffn", "routed_experts", "shared_experts", "embeddings")


class Checkpoint(Frozen):
    """How the shipped checkpoint stores each module group (format names of :class:`Precision`)."""

    attention: str = "bf16"
    dense_ffn: str = "bf16"
    routed_experts: str = "bf16"
    shared_experts: str = "bf16"
    embeddings: str = "bf16"
    source: str = Field(default="", description="where the formats were read (quantization_config)")

    @field_validator("attention", "dense_ffn", "routed_experts", "shared_experts", "embeddings")
    @classmethod
    def _known(cls, v: str) -> str:
        return Precision.parse(v, "checkpoint format").value

    def formats(self) -> ModuleFormats:
        """The per-group formats as Precisions."""
        return ModuleFormats(**{g: Precision.parse(getattr(self, g)) for g in MODULE_GROUPS})


@dataclass(frozen=True)
class ModuleFormats:
    """Weight format of each module group for one scenario."""

    attention: Precision = Precision.BF16
    dense_ffn: Precision = Precision.BF16
    routed_experts: Precision = Precision.BF16
    shared_experts: Precision = Precision.BF16
    embeddings: Precision = Precision.BF16

    @classmethod
    def uniform(cls, p: Precision, embeddings: Precision) -> ModuleFormats:
        """Every linear group in ``p``, embeddings in ``embeddings``."""
        return cls(p, p, p, p, embeddings)

    def get(self, group: str) -> Precision:
        """Format of ``group`` (one of MODULE_GROUPS)."""
        value: Precision = getattr(self, group)
        return value

    def label(self) -> str:
        """Short description such as ``attention bf16, routed_experts mxfp4`` (groups not bf16 named)."""
        parts = [f"{g} {self.get(g).value}" for g in MODULE_GROUPS if self.get(g) is not Precision.BF16]
        return ", ".join(parts) or "bf16"


def override_formats(base: ModuleFormats, overrides: dict[str, str | Precision]) -> ModuleFormats:
    """``base`` with some groups replaced, e.g. {"routed_experts": "nvfp4"}; unknown groups are an error."""
    bad = sorted(set(overrides) - set(MODULE_GROUPS))
    if bad:
        from roofline.errors import ScenarioError

        raise ScenarioError(f"unknown module group(s) {', '.join(bad)} in weight_dtype; use {', '.join(MODULE_GROUPS)}")
    new = {
        g: Precision.parse(overrides[g], f"weight_dtype[{g}]") if g in overrides else base.get(g) for g in MODULE_GROUPS
    }
    return ModuleFormats(**new)


def _summary(qc: dict[str, Any]) -> str:
    """The fields of a quantization_config that decide the formats, compactly (ignore lists by count)."""
    import json

    keys = ("quant_method", "quant_algo", "fmt", "weight_block_size", "bits", "group_size", "modules_to_not_convert")
    out = {k: qc[k] for k in keys if k in qc}
    groups = qc.get("config_groups")
    if isinstance(groups, dict) and groups:
        first = next(iter(groups.values()))
        w = first.get("weights") if isinstance(first, dict) else None
        if isinstance(w, dict):
            out["weights"] = {k: w[k] for k in ("type", "num_bits", "group_size", "strategy", "symmetric") if k in w}
    ignore = qc.get("ignore")
    if isinstance(ignore, list):
        attn = sum("self_attn" in str(p) for p in ignore)
        out["ignore"] = f"{len(ignore)} patterns ({attn} self_attn)"
    return json.dumps(out, default=str)


def _ignored_groups(ignore: object) -> set[str]:
    """Module groups a quantization ``ignore`` / ``modules_to_not_convert`` list keeps in 16 bits.

    ``self_attn`` → attention; ``shared_expert`` → shared experts; ``mlp.(gate|up|gate_up|down)_proj``
    (not under ``experts``) → dense FFN; ``lm_head`` / ``embed`` → embeddings (always 16-bit here).
    A pattern naming some layers only counts as the whole group (16-bit: the larger, safer figure).
    """
    pats = [str(p).lower() for p in ignore] if isinstance(ignore, list) else []
    groups = set()
    if any("self_attn" in p for p in pats):
        groups.add("attention")
    if any("shared_expert" in p for p in pats):
        groups.add("shared_experts")
    if any(re.search(r"mlp\W{0,2}\(?(gate|up|gate_up|down)", p) and "expert" not in p for p in pats):
        groups.add("dense_ffn")
    return groups


def _with_ignored(fmt: str, ignore: object, src: str) -> Checkpoint:
    """Every linear group in ``fmt`` except those the ignore list keeps in bf16."""
    keep = _ignored_groups(ignore)
    return Checkpoint(**{g: ("bf16" if g in keep else fmt) for g in MODULE_GROUPS if g != "embeddings"}, source=src)


def _compressed_tensors_format(qc: dict[str, Any], where: str) -> str:
    """The weight format of a compressed-tensors ``config_groups`` entry (first group)."""
    groups = qc.get("config_groups")
    first = next(iter(groups.values()), None) if isinstance(groups, dict) and groups else None
    w = first.get("weights") if isinstance(first, dict) else None
    if not isinstance(w, dict):
        raise SpecError(f"{where}: compressed-tensors quantization_config without config_groups weights")
    bits, typ, group = w.get("num_bits"), str(w.get("type", "")), w.get("group_size")
    sym, strategy = w.get("symmetric", True), str(w.get("strategy", ""))
    if typ == "float" and bits == 4 and group == 16:
        return "nvfp4"
    if typ == "float" and bits == 4 and group == 32:
        return "mxfp4"  # compressed-tensors mxfp4-pack-quantized: E8M0 scale per 32
    if typ == "float" and bits == 8:
        return "fp8-block" if strategy == "block" else "fp8"
    if typ == "int" and bits == 4 and group == 32 and sym:
        return "int4-g32"
    if typ == "int" and bits == 4 and group == 128 and not sym:
        return "int4-g128"
    raise SpecError(
        f"{where}: compressed-tensors weights {typ} {bits}-bit, group_size {group}, symmetric {sym} are not a "
        "format roofline knows (nvfp4, fp8, int4 g32 symmetric, int4 g128 asymmetric); set weight_dtype explicitly"
    )


_MODELOPT_ALGO = {
    "NVFP4": "nvfp4", "W4A16_NVFP4": "nvfp4", "FP8": "fp8", "MXFP8": "mxfp8", "W4A16_AWQ": "int4-g128",
    "INT4_AWQ": "int4-g128",
}  # fmt: skip


def _layer_group(name: str) -> str | None:
    """Module group of a checkpoint module name (None: embeddings, lm_head or unknown)."""
    n = name.lower()
    if "self_attn" in n or "linear_attn" in n or ".attn." in n or n.endswith(".attn"):
        return "attention"
    if "shared_expert" in n:
        return "shared_experts"
    if "experts" in n:
        return "routed_experts"
    if re.search(r"\.(mlp|ffn)\.(gate|up|gate_up|down)_proj", n):
        return "dense_ffn"
    return None


def _mixed_precision(layers: dict[str, Any], base: str, where: str, src: str) -> Checkpoint:
    """ModelOpt MIXED_PRECISION: each group takes the most common ``quant_algo`` of its listed modules;
    groups not listed keep ``base`` (fp8-block for an fp8 checkpoint, else bf16)."""
    from collections import Counter

    votes: dict[str, Counter[str]] = {g: Counter() for g in MODULE_GROUPS}
    for name, spec in layers.items():
        group = _layer_group(str(name))
        algo = str(spec.get("quant_algo", "")).upper() if isinstance(spec, dict) else ""
        if group is not None and algo:
            if algo not in _MODELOPT_ALGO:
                raise SpecError(f"{where}: modelopt quant_algo '{algo}' of {name} is not a format roofline knows")
            votes[group][_MODELOPT_ALGO[algo]] += 1
    fmts = {g: (votes[g].most_common(1)[0][0] if votes[g] else base) for g in MODULE_GROUPS if g != "embeddings"}
    return Checkpoint(**fmts, source=src)


def _int4_group(qc: dict[str, Any], where: str) -> str:
    bits, group = qc.get("bits", qc.get("w_bit")), qc.get("group_size", qc.get("q_group_size"))
    if bits == 4 and group == 128:
        return "int4-g128"
    raise SpecError(
        f"{where}: quantization_config {qc.get('quant_method')} with bits={bits}, group_size={group} is not a "
        "format roofline knows; known: 4-bit group 128 (int4-g128). Set weight_dtype explicitly."
    )


def checkpoint_from_quantization_config(qc: object, where: str = "config.json") -> Checkpoint | None:
    """The :class:`Checkpoint` a ``quantization_config`` describes (module docstring); None when absent.

    ``qc``: the config value as read; anything but a mapping (or None) is an error."""
    if qc is None or qc == {}:
        return None
    if not isinstance(qc, dict):
        raise SpecError(
            f"{where}: quantization_config must be a mapping with a quant_method (got {type(qc).__name__}); "
            "fix the config or remove the key"
        )

    method = str(qc.get("quant_method", "")).lower()
    producer = qc.get("producer")
    if not method and isinstance(producer, dict) and str(producer.get("name", "")).lower() == "modelopt":
        method = "modelopt"  # ModelOpt hf_quant_config style: quant_algo without quant_method
    src = f"quantization_config of {where}: {_summary(qc)}"
    if str(qc.get("quant_algo", "")).upper() == "MIXED_PRECISION" and isinstance(qc.get("quantized_layers"), dict):
        base = "fp8-block" if method == "fp8" and qc.get("weight_block_size") else "bf16"
        return _mixed_precision(qc["quantized_layers"], base, where, src)
    if method == "fp8":
        fmt = "fp8-block" if qc.get("weight_block_size") else "fp8"
        return Checkpoint(attention=fmt, dense_ffn=fmt, routed_experts=fmt, shared_experts=fmt, source=src)
    if method == "mxfp4":
        listed = qc.get("modules_to_not_convert")
        keep = [str(m) for m in listed] if isinstance(listed, list) else []
        attn = "bf16" if any("self_attn" in m for m in keep) else "mxfp4"
        return Checkpoint(attention=attn, dense_ffn="mxfp4", routed_experts="mxfp4", shared_experts="mxfp4", source=src)
    if method in ("awq", "gptq"):
        fmt = _int4_group(qc, where)
        return Checkpoint(attention=fmt, dense_ffn=fmt, routed_experts=fmt, shared_experts=fmt, source=src)
    if method == "modelopt":
        algo = str(qc.get("quant_algo", "")).upper()
        fmt = _MODELOPT_ALGO.get(algo, "")
        if not fmt:
            raise SpecError(
                f"{where}: modelopt quant_algo '{algo}' is not a format roofline knows (NVFP4, FP8, W4A16_AWQ)"
            )
        return _with_ignored(fmt, qc.get("ignore", qc.get("exclude_modules")), src)
    if method == "compressed-tensors":
        return _with_ignored(_compressed_tensors_format(qc, where), qc.get("ignore"), src)
    raise SpecError(
        f"{where}: quantization_config quant_method '{method}' is not one roofline reads (fp8, mxfp4, awq, gptq, "
        "modelopt, compressed-tensors); remove it or set the weight formats with weight_dtype"
    )


def checkpoint_spec(qc: object, where: str) -> dict[str, str] | None:
    """The ``checkpoint`` block of a model spec for a ``quantization_config`` (None when absent)."""
    cp = checkpoint_from_quantization_config(qc, where.replace("\\", "/").rsplit("/", 1)[-1])
    return None if cp is None else cp.model_dump(mode="json")
