"""Import a Hugging Face ``config.json`` into a :class:`~roofline.specs.model.ModelSpec`.

The adapter is strict: each supported architecture reads its own keys explicitly, a
missing required key or a wrong type raises :class:`~roofline.errors.SpecError` naming
the key, and an unsupported architecture raises one listing the supported ones.
Semantics follow the Hugging Face ``transformers`` modelling code:

* ``head_dim`` when present (Qwen3-30B-A3B: 128, not hidden/heads = 64), else
  ``hidden_size // num_attention_heads``; ``num_key_value_heads`` defaults to the heads.
* Sliding window: Mistral, Mixtral and Phi-3 apply ``sliding_window`` to every layer
  (Phi3Attention passes ``config.sliding_window`` to all layers, so Phi-3-mini-4k is
  all-local with window 2047); Qwen2/Qwen3-MoE only when ``use_sliding_window`` is true
  (never from ``sliding_window`` alone), on layers ``>= max_window_layers``; Gemma-2
  alternates ``[local, global]`` from layer 0; gpt-oss (and any config with
  ``layer_types``) follows ``layer_types``. Per-layer kinds are stored as their
  shortest cyclic ``layer_pattern``.
* MoE: dense layers must be a leading block (``first_k_dense_replace``; Qwen3
  ``mlp_only_layers`` / ``decoder_sparse_step``), anything else is an error.
  DeepSeek's ``n_shared_experts`` is one shared MLP of width
  ``n_shared_experts * moe_intermediate_size`` (as in ``DeepseekV3MoE``; the count is
  the same as that many experts of width ``moe_intermediate_size``).
* DeepSeek-V3's MLA head_dim is ``qk_nope_head_dim + qk_rope_head_dim``; its
  multi-token-prediction layers (``num_nextn_predict_layers``) go to ``mtp_layers`` and are
  not in ``param_count()``, like the 671B the authors state (``mtp_param_count()`` counts
  them). ``e_score_correction_bias`` is counted as a router bias. DeepSeek-V2 (and V2-Lite, whose
  ``q_lora_rank`` is null: a full q_proj) has none: its ``topk_method`` must be greedy or group_limited_greedy
  over a softmax, anything else is an error naming the key.
* Phi-3.5-MoE (``PhiMoEForCausalLM`` / ``PhimoeForCausalLM``) reads like Mixtral (every layer MoE,
  ``sliding_window`` on every layer) with q/k/v/o biases from ``attention_bias`` and LayerNorm; the LayerNorm
  and ``lm_head_bias`` biases have no spec field and are left out of the counts (0.0007%), as the notes say.
* Architectures with per-layer structure (Qwen3.5/3.6, Nemotron-H, Llama-4, Gemma-4,
  DeciLM, MiMo-V2, Step-3.7, MiniMax-M2) are read by the adapters in
  :mod:`roofline.specs.hf_families` into ``layers``/``linear_attention``; DeepSeek-V3.2 and
  GLM-5 (DSA) become sparse MLA layers with ``sparse_attention``; DeepSeek-V4 (``hf_deepseek_v4``) becomes
  ``compressed`` layers with ``compressed_attention``, Kimi Linear / Kimi-K3 (``hf_kimi``) KDA + MLA layers.
* Multimodal wrappers: the language model is read from ``text_config`` (Qwen3-VL, Qwen3.5,
  Llama-4, Gemma-4, Kimi-K2.5) and the notes say the encoders are not modelled.
* Biases: Qwen2 always has q/k/v biases; ``attention_bias`` gives q/k/v/o biases on
  Llama, Qwen3, Qwen3-MoE, Gemma-2 and gpt-oss (others ignore it, as HF does); MiMo (a
  Qwen2 derivative) has q/k/v biases unless ``attention_bias`` is false; gpt-oss also has
  sinks, router and expert biases; Qwen3 has QK-norm; Gemma-2 has 4 norms per layer.
* ``quantization_config`` is recorded in ``notes`` (not interpreted here); ``native_dtype`` comes from
  ``torch_dtype`` (``dtype``), bf16 when absent.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

from roofline.boundary.inputs import expand_user, read_text
from roofline.boundary.limits import MAX_LAYERS
from roofline.errors import SpecError
from roofline.specs import hf_families as families
from roofline.specs.hf_adapters import ADAPTERS
from roofline.specs.hf_config import MISSING, HfConfig
from roofline.specs.hf_families import NOT_MODELLED
from roofline.specs.hf_fields import DEEPSEEK_ARCHS, PHIMOE_ARCHS, attention_fields, config_dtype, moe_fields
from roofline.specs.model import ModelSpec
from roofline.specs.quant import checkpoint_spec
from roofline.specs.validation import validate_spec
from roofline.specs.yaml_out import spec_to_yaml

if TYPE_CHECKING:
    from roofline.specs.jsontypes import JsonObject

__all__ = ["SUPPORTED", "model_from_hf_config", "spec_to_yaml"]

#: architecture -> model_type, in the order error messages list them
SUPPORTED: dict[str, str] = {
    "LlamaForCausalLM": "llama",
    "MistralForCausalLM": "mistral",
    "MixtralForCausalLM": "mixtral",
    "Qwen2ForCausalLM": "qwen2",
    "Qwen3MoeForCausalLM": "qwen3_moe",
    "DeepseekV3ForCausalLM": "deepseek_v3",
    "DeepseekV2ForCausalLM": "deepseek_v2",
    "Gemma2ForCausalLM": "gemma2",
    "Phi3ForCausalLM": "phi3",
    "GptOssForCausalLM": "gpt_oss",
    "Qwen3ForCausalLM": "qwen3",
    "MiMoForCausalLM": "mimo",
    "DeepseekV32ForCausalLM": "deepseek_v32",
    "GlmMoeDsaForCausalLM": "glm_moe_dsa",
    "MiniMaxM2ForCausalLM": "minimax_m2",
    "MiniMaxM3ForCausalLM": "minimax_m3",
    "MiniMaxM3SparseForCausalLM": "minimax_m3_text",
    "Llama4ForCausalLM": "llama4_text",
    "Gemma4ForCausalLM": "gemma4_text",
    "Qwen3_5ForCausalLM": "qwen3_5_text",
    "Qwen3_5MoeForCausalLM": "qwen3_5_moe_text",
    "NemotronHForCausalLM": "nemotron_h",
    "DeciLMForCausalLM": "nemotron-nas",
    "MiMoV2FlashForCausalLM": "mimo_v2_flash",
    "Step3p7FlashForCausalLM": "step3p7",
    "PhiMoEForCausalLM": "phimoe",
    "PhimoeForCausalLM": "phimoe",
    "KimiLinearForCausalLM": "kimi_linear",
    "DeepseekV4ForCausalLM": "deepseek_v4",
}
#: text_config model_types of multimodal wrappers -> the text architecture they share
_BY_MODEL_TYPE = {
    **{mt: arch for arch, mt in SUPPORTED.items()},
    "qwen3_vl_text": "Qwen3ForCausalLM",
    "qwen3_vl_moe_text": "Qwen3MoeForCausalLM",
    "kimi_k2": "DeepseekV3ForCausalLM",
}
_TIED_DEFAULT = {"Gemma2ForCausalLM": True}
_NORMS_PER_LAYER = {"Gemma2ForCausalLM": 4}
_MAX_LAYERS = MAX_LAYERS
_WRAPPER = "__roofline_wrapper__"  # private key: the multimodal wrapper class a text_config came from


# ---- reading --------------------------------------------------------------------------
def _read(path_or_dict: str | Path | dict[str, Any]) -> tuple[dict[str, Any], str, str | None]:
    """The config mapping, a description of where it came from, and the file stem."""
    if isinstance(path_or_dict, dict):
        return path_or_dict, "config dict", None
    if not isinstance(path_or_dict, str | Path):
        raise SpecError(f"expected a config.json path or a dict, got {type(path_or_dict).__name__}")
    path = expand_user(path_or_dict)
    text = read_text(path, "config file")  # regular files only, size-limited, UTF-8 (roofline.boundary.inputs)
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path} is not valid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}") from None
    except RecursionError:
        raise SpecError(f"{path} is nested too deeply to be a config.json") from None
    except ValueError as exc:  # e.g. an integer of more than 4,300 digits
        raise SpecError(f"{path} holds a value that cannot be read: {exc}; check the file") from None
    if not isinstance(data, dict):
        raise SpecError(f"{path} must hold a JSON object (a config.json), got {type(data).__name__}")
    return data, str(path), path.stem


def _unsupported(what: str) -> SpecError:
    return SpecError(
        f"unsupported architecture {what}; supported: {', '.join(SUPPORTED)}. "
        "Write a model YAML by hand (see `roofline schema model`) for other architectures."
    )


def _not_modelled(arch: str, origin: str) -> SpecError:
    return SpecError(
        f"{origin}: architecture '{arch}' is recognised but not modelled: roofline lacks {NOT_MODELLED[arch]}. "
        "Write a model YAML by hand (see `roofline schema model`) approximating it, or pick a supported model."
    )


def _architecture(raw: dict[str, Any], origin: str) -> tuple[dict[str, Any], str]:
    """The text-model config (``text_config`` when present) and its supported architecture.

    A multimodal wrapper's language model is read from ``text_config`` (its class from the inner
    ``architectures``, the outer one, or the inner ``model_type``); the wrapper's name is kept
    under a private key so the notes can say that the encoders are not modelled.
    """
    archs = raw.get("architectures")
    if archs is not None and (not isinstance(archs, list) or not all(isinstance(a, str) for a in archs)):
        raise SpecError(f"{origin}: key 'architectures' must be a list of class names, got {archs!r}")
    top = archs[0] if archs else None
    if top in NOT_MODELLED:
        raise _not_modelled(top, origin)
    inner = raw.get("text_config")
    if inner is None:
        if top is None:
            raise SpecError(f"{origin}: key 'architectures' is missing; supported: {', '.join(SUPPORTED)}")
        if top not in SUPPORTED:
            raise _unsupported(f"'{top}' in {origin}")
        return raw, top
    if not isinstance(inner, dict):
        raise SpecError(f"{origin}: key 'text_config' must be a mapping, got {type(inner).__name__}")
    inner_archs = inner.get("architectures")
    inner_arch = inner_archs[0] if isinstance(inner_archs, list) and inner_archs else None
    if isinstance(inner_arch, str) and inner_arch in NOT_MODELLED:
        raise _not_modelled(inner_arch, origin)
    model_type = inner.get("model_type")
    by_type = _BY_MODEL_TYPE.get(model_type) if isinstance(model_type, str) else None
    arch = next((a for a in (inner_arch, top, by_type) if isinstance(a, str) and a in SUPPORTED), None)
    if arch is None:
        raise _unsupported(f"'{top}' (text_config model_type {model_type!r}) in {origin}")
    inherited = ("_name_or_path", "tie_word_embeddings", "quantization_config", "torch_dtype", "dtype")
    data = {**{k: raw[k] for k in inherited if k in raw}, **inner}
    if top is not None and top != arch:
        data[_WRAPPER] = top
    return data, arch


# ---- architecture pieces ----------------------------------------------------------------
def _notes(c: HfConfig) -> str:
    """Facts worth keeping that the schema has no field for."""
    notes = []
    if c.data.get("quantization_config") is not None:
        try:
            qc = json.dumps(c.data["quantization_config"], sort_keys=True, default=str)
        except (TypeError, ValueError):  # a caller's dict with mixed-type keys or a cycle
            qc = repr(c.data["quantization_config"])
        notes.append(f"Checkpoint quantization_config (recorded only, not used for native_dtype): {qc}.")
    if "torch_dtype" not in c.data and "dtype" not in c.data:
        notes.append("No torch_dtype in the config; bf16 assumed.")
    if c.arch == "Phi3ForCausalLM" and c.data.get("sliding_window") is not None:
        notes.append("HF Phi3Attention applies sliding_window to every layer.")
    if c.arch in DEEPSEEK_ARCHS:
        notes.append(
            "Multi-token-prediction layers (num_nextn_predict_layers) are in mtp_layers, counted by mtp_param_count "
            "and not by param_count. Shared experts are one MLP of width n_shared_experts*moe_intermediate_size; "
            + (
                "the softmax router (topk_method greedy/group_limited_greedy, n_group, topk_group, "
                "routed_scaling_factor) has no bias; group limiting changes which experts a token uses, not how many."
                if c.arch == "DeepseekV2ForCausalLM"
                else "router_bias is e_score_correction_bias."
            )
        )
    if c.arch in PHIMOE_ARCHS:
        notes.append(_phimoe_note(c))
    if c.arch == "MiMoForCausalLM":
        notes.append("Multi-token-prediction layers (num_nextn_predict_layers) are in mtp_layers, not in param_count.")
    wrapper = c.data.get(_WRAPPER)
    if wrapper:
        notes.append(
            f"Multimodal wrapper {wrapper}: the language model is imported from text_config; the vision/audio "
            "encoders and projector are out of scope (not counted, not costed)."
        )
    return " ".join(notes)


def _phimoe_note(c: HfConfig) -> str:
    """Phi-3.5-MoE (HF ``PhimoeForCausalLM``) facts the schema has no field for, and why they cost nothing here."""
    head = c.typed("lm_head_bias", bool, False)
    return (
        "LayerNorm (not RMSNorm): its bias vectors (2h per layer + h) are not counted (0.0006% of the weights). "
        + (
            f"lm_head_bias: the head's {c.integer('vocab_size'):,} bias values are not counted (one add per logit). "
            if head
            else ""
        )
        + "Routing (sparsemixer top-2; router/input jitter noise applies in training only) costs the gate matmul, as "
        "counted. longrope rope_scaling changes rotary angles only. HF applies sliding_window to every layer."
    )


# ---- public API -------------------------------------------------------------------------
def _slug(text: str) -> str:
    """Lowercase slug of the last path component: ``meta-llama/Llama-2-7b-hf`` -> ``llama-2-7b-hf``."""
    slug = re.sub(r"[^a-z0-9.\-]+", "-", text.rstrip("/").rsplit("/", 1)[-1].lower())
    return slug.lstrip(".-") or "model"


def _names(c: HfConfig, stem: str | None, name: str | None) -> tuple[str, str, str | None]:
    """``(name, display_name, hf_repo)`` from the argument, ``_name_or_path`` or the file stem."""
    path = c.data.get("_name_or_path")
    path = path if isinstance(path, str) and path.strip("/. ") else None
    base = path.rstrip("/").rsplit("/", 1)[-1] if path else stem or SUPPORTED[c.arch]
    repo = path if path and path.count("/") == 1 and not path.startswith((".", "/", "~")) else None
    return name if name is not None else _slug(base), base, repo


def model_from_hf_config(path_or_dict: str | Path | JsonObject, name: str | None = None) -> ModelSpec:
    """Build a :class:`ModelSpec` from a Hugging Face ``config.json`` (path) or its dict.

    ``name`` defaults to a lowercase slug of ``_name_or_path`` or the file stem.
    Raises :class:`SpecError` for unreadable files, bad JSON (with line and column),
    unsupported architectures, missing required keys and inconsistent values.
    """
    raw, origin, stem = _read(path_or_dict)
    data, arch = _architecture(raw, origin)
    c = HfConfig(data, arch, origin)
    blocks = data.get("layers_block_type")  # Nemotron-3 Ultra/Lightning name the blocks instead of counting them
    num_layers = c.integer("num_hidden_layers", default=len(blocks) if isinstance(blocks, list) else MISSING)
    if num_layers > _MAX_LAYERS:
        raise c.fail("num_hidden_layers", f"is {num_layers}, implausibly large (> {_MAX_LAYERS})")
    hidden = c.integer("hidden_size")
    slug, display, repo = _names(c, stem, name)
    spec: dict[str, Any] = {
        "name": slug,
        "display_name": display,
        "hf_repo": repo,
        "architecture": arch,
        "num_layers": num_layers,
        "hidden_size": hidden,
        "vocab_size": c.integer("vocab_size"),
        "tie_word_embeddings": c.typed("tie_word_embeddings", bool, _TIED_DEFAULT.get(arch, False)),
        "max_position_embeddings": c.opt_int("max_position_embeddings"),
        "norm": "layernorm" if arch in PHIMOE_ARCHS else "rmsnorm",
        "norms_per_layer": _NORMS_PER_LAYER.get(arch, 2),
        "native_dtype": config_dtype(c),
        "checkpoint": checkpoint_spec(c.data.get("quantization_config"), f"{origin}"),
        "sources": [{"fields": "all architecture fields", "ref": f"Hugging Face config.json ({origin}, {arch})"}],
    }
    act = c.typed("hidden_activation", str, c.typed("hidden_act", str, "silu"))
    notes = [_notes(c)]
    if arch in ADAPTERS:
        family = ADAPTERS[arch](c, hidden, num_layers)
        notes += family.pop("notes")
        family["ffn"].setdefault("activation", act)
        spec |= family
    else:
        spec |= {
            "attention": attention_fields(c, hidden, num_layers),
            "ffn": {
                "kind": "gated",
                "intermediate_size": c.integer("intermediate_size"),
                "activation": act,
                "bias": arch == "LlamaForCausalLM" and c.typed("mlp_bias", bool, False),
            },
            "moe": moe_fields(c, num_layers),
        }
        if arch in DEEPSEEK_ARCHS or arch == "MiMoForCausalLM":
            spec["mtp_layers"] = c.integer("num_nextn_predict_layers", default=0, minimum=0)
        if arch in ("DeepseekV32ForCausalLM", "GlmMoeDsaForCausalLM"):
            spec |= families.dsa(c, spec, num_layers)
    spec["notes"] = " ".join(n for n in notes if n)
    return validate_spec(ModelSpec, spec, f"{origin} ({arch})")
