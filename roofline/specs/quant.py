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
* ``quant_method: modelopt`` / ``compressed-tensors`` naming NVFP4 → ``nvfp4``; FP8 → ``fp8``.
"""

from __future__ import annotations

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
    new = {g: Precision.parse(overrides[g], f"weight_dtype[{g}]") if g in overrides else base.get(g)
           for g in MODULE_GROUPS}  # fmt: skip
    return ModuleFormats(**new)


def _int4_group(qc: dict[str, Any], where: str) -> str:
    bits, group = qc.get("bits", qc.get("w_bit")), qc.get("group_size", qc.get("q_group_size"))
    if bits == 4 and group == 128:
        return "int4-g128"
    raise SpecError(
        f"{where}: quantization_config {qc.get('quant_method')} with bits={bits}, group_size={group} is not a "
        "format roofline knows; known: 4-bit group 128 (int4-g128). Set weight_dtype explicitly."
    )


def checkpoint_from_quantization_config(qc: dict[str, Any] | None, where: str = "config.json") -> Checkpoint | None:
    """The :class:`Checkpoint` a ``quantization_config`` describes (module docstring); None when absent."""
    if qc is None or qc == {}:
        return None
    if not isinstance(qc, dict):
        raise SpecError(
            f"{where}: quantization_config must be a mapping with a quant_method (got {type(qc).__name__}); "
            "fix the config or remove the key"
        )
    import json

    method = str(qc.get("quant_method", "")).lower()
    src = f"quantization_config of {where}: {json.dumps(qc, sort_keys=True, default=str)}"
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
    text = str(qc).lower()
    if method in ("modelopt", "compressed-tensors"):
        fmt = "nvfp4" if "nvfp4" in text or "fp4" in text else "fp8" if "fp8" in text or "float" in text else ""
        if fmt:
            return Checkpoint(attention=fmt, dense_ffn=fmt, routed_experts=fmt, shared_experts=fmt, source=src)
    raise SpecError(
        f"{where}: quantization_config quant_method '{method}' is not one roofline reads (fp8, mxfp4, awq, gptq, "
        "modelopt, compressed-tensors); remove it or set the weight formats with weight_dtype"
    )


def checkpoint_spec(qc: dict[str, Any] | None, where: str) -> dict[str, str] | None:
    """The ``checkpoint`` block of a model spec for a ``quantization_config`` (None when absent)."""
    cp = checkpoint_from_quantization_config(qc, where.replace("\\", "/").rsplit("/", 1)[-1])
    return None if cp is None else cp.model_dump(mode="json")
