"""The Hugging Face config.json importer and the bundled model YAMLs generated with it."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

import roofline
from roofline.errors import RooflineError, SpecError
from roofline.specs.hf_import import SUPPORTED, model_from_hf_config, spec_to_yaml
from roofline.specs.library import bundled_dir, spec_path
from roofline.specs.model import ModelSpec

FIXTURES = Path(__file__).parent / "fixtures" / "configs"

#: bundled slug -> the config.json fixture its YAML was generated from
BUNDLED = {
    "llama-2-7b": "Llama-2-7b-hf.json",
    "llama-2-13b": "Llama-2-13b-hf.json",
    "llama-2-70b": "Llama-2-70b-hf.json",
    "llama-3.1-8b": "Llama-3.1-8B.json",
    "llama-3.1-70b": "Llama-3.1-70B.json",
    "llama-3.1-405b": "Llama-3.1-405B.json",
    "mistral-7b": "Mistral-7B-v0.1.json",
    "mixtral-8x7b": "Mixtral-8x7B-v0.1.json",
    "mixtral-8x22b": "Mixtral-8x22B-v0.1.json",
    "qwen2.5-7b": "Qwen2.5-7B.json",
    "qwen2.5-72b": "Qwen2.5-72B.json",
    "qwen3-30b-a3b": "Qwen3-30B-A3B.json",
    "deepseek-v3": "DeepSeek-V3.json",
    "gemma-2-9b": "gemma-2-9b-it.json",
    "phi-3-mini-4k": "Phi-3-mini-4k-instruct.json",
    "gpt-oss-120b": "gpt-oss-120b.json",
}
_METADATA = {"name", "display_name", "aliases", "hf_repo", "sources", "notes"}


def imported(slug: str) -> ModelSpec:
    return model_from_hf_config(FIXTURES / BUNDLED[slug], name=slug)


def config(slug: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / BUNDLED[slug]).read_text())
    return data


# ---- every fixture, every bundled YAML --------------------------------------------------------
def test_every_fixture_is_covered() -> None:
    assert sorted(p.name for p in FIXTURES.glob("*.json")) == sorted(BUNDLED.values())
    assert sorted(p.stem for p in bundled_dir("model").glob("*.yaml")) == sorted(BUNDLED)


@pytest.mark.parametrize("slug", sorted(BUNDLED))
def test_fixture_imports(slug: str) -> None:
    spec = imported(slug)
    assert spec.name == slug
    assert spec.architecture == config(slug)["architectures"][0]
    assert spec.param_count() >= spec.active_param_count() > 0


@pytest.mark.parametrize("slug", sorted(BUNDLED))
def test_bundled_yaml_equals_import(slug: str) -> None:
    bundled = roofline.model(slug)
    assert bundled.name == slug
    assert bundled.model_dump(exclude=_METADATA) == imported(slug).model_dump(exclude=_METADATA)
    assert len(bundled.sources) == 2 and BUNDLED[slug] in bundled.sources[0].ref


@pytest.mark.parametrize("slug", sorted(BUNDLED))
def test_bundled_yaml_header_names_fixture(slug: str) -> None:
    head = spec_path("model", slug).read_text().split("\nname:")[0]
    assert head.startswith("#") and f"tests/fixtures/configs/{BUNDLED[slug]}" in head


@pytest.mark.parametrize(
    ("alias", "slug"),
    [
        ("meta-llama/Llama-3.1-70B", "llama-3.1-70b"),
        ("meta-llama/Meta-Llama-3.1-8B", "llama-3.1-8b"),
        ("mistral-7b-v0.1", "mistral-7b"),
        ("Qwen/Qwen3-30B-A3B", "qwen3-30b-a3b"),
        ("phi-3-mini-4k-instruct", "phi-3-mini-4k"),
    ],
)
def test_aliases_index(alias: str, slug: str) -> None:
    assert spec_path("model", alias) == spec_path("model", slug)


def test_alias_without_slash_loads() -> None:
    assert roofline.model("Mixtral-8x7B-v0.1").name == "mixtral-8x7b"


def test_hf_repo_alias_loads() -> None:
    assert roofline.model("meta-llama/Llama-3.1-70B").name == "llama-3.1-70b"


@pytest.mark.parametrize("slug", sorted(BUNDLED))
def test_spec_to_yaml_round_trips(slug: str) -> None:
    spec = roofline.model(slug)
    text = spec_to_yaml(spec)
    assert text.startswith("# ")
    assert not [line for line in text.splitlines() if line.rstrip().endswith((": null", ": None"))]
    assert ModelSpec.model_validate(yaml.safe_load(text)) == spec


@settings(max_examples=100, deadline=None)
@given(notes=st.text(max_size=300), display=st.text(min_size=1, max_size=120))
def test_spec_to_yaml_round_trips_any_text(notes: str, display: str) -> None:
    spec = roofline.model("gemma-2-9b").model_copy(update={"notes": notes, "display_name": display})
    assert ModelSpec.model_validate(yaml.safe_load(spec_to_yaml(spec))) == spec


def test_json_path_loads_through_library() -> None:
    spec = roofline.model(str(FIXTURES / "Llama-3.1-8B.json"))
    assert spec.name == "llama-3.1-8b"  # file stem, lowercased
    assert spec.param_count() == roofline.model("llama-3.1-8b").param_count()


# ---- architecture specifics -------------------------------------------------------------------
def test_qwen3_moe_head_dim_is_explicit() -> None:
    spec = imported("qwen3-30b-a3b")
    assert spec.hidden_size // spec.attention.num_heads == 64
    assert spec.attention.head_dim == 128
    assert spec.attention.qk_norm
    assert spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.top_k, spec.moe.expert_intermediate_size) == (128, 8, 768)
    assert spec.moe.first_dense_layers == 0


@pytest.mark.parametrize("slug", ["qwen2.5-7b", "qwen2.5-72b"])
def test_qwen2_has_no_sliding_window(slug: str) -> None:
    assert config(slug)["sliding_window"] == 131072  # present, but use_sliding_window is false
    spec = imported(slug)
    assert spec.attention.sliding_window is None and spec.attention.layer_pattern is None
    assert set(spec.layer_kinds()) == {"global"}
    assert spec.attention.qkv_bias and not spec.attention.o_bias


def test_qwen2_sliding_window_when_enabled() -> None:
    cfg = config("qwen2.5-7b") | {"use_sliding_window": True, "sliding_window": 4096, "max_window_layers": 20}
    spec = model_from_hf_config(cfg)
    assert spec.attention.sliding_window == 4096
    assert spec.layer_kinds() == ("global",) * 20 + ("local",) * 8


def test_gemma2_alternates_and_ties() -> None:
    cfg = config("gemma-2-9b")
    assert "tie_word_embeddings" not in cfg
    spec = imported("gemma-2-9b")
    assert spec.tie_word_embeddings
    assert spec.attention.layer_pattern == ("local", "global")
    assert spec.attention.sliding_window == 4096
    assert spec.layer_kinds()[:4] == ("local", "global", "local", "global")
    assert spec.norms_per_layer == 4
    assert spec.ffn.activation == "gelu_pytorch_tanh"


def test_gpt_oss_pattern_from_layer_types() -> None:
    spec = imported("gpt-oss-120b")
    cfg = config("gpt-oss-120b")
    want = tuple("local" if t == "sliding_attention" else "global" for t in cfg["layer_types"])
    assert spec.layer_kinds() == want
    assert spec.attention.layer_pattern == ("local", "global") and spec.attention.sliding_window == 128
    a, m = spec.attention, spec.moe
    assert a.qkv_bias and a.o_bias and a.sinks
    assert m is not None and m.router_bias and m.expert_bias and (m.num_experts, m.top_k) == (128, 4)
    assert "mxfp4" in spec.notes


def test_gpt_oss_layer_types_drive_pattern() -> None:
    cfg = config("gpt-oss-120b")
    cfg["layer_types"] = ["full_attention"] * 35 + ["sliding_attention"]
    spec = model_from_hf_config(cfg)
    assert spec.layer_kinds() == ("global",) * 35 + ("local",)


def test_deepseek_v3_mla_and_dense_layers() -> None:
    spec = imported("deepseek-v3")
    mla = spec.attention.mla
    assert mla is not None and spec.attention.kind == "mla"
    assert (mla.q_lora_rank, mla.kv_lora_rank, mla.qk_rope_head_dim, mla.qk_nope_head_dim, mla.v_head_dim) == (
        1536,
        512,
        64,
        128,
        128,
    )
    assert spec.moe is not None and spec.moe.first_dense_layers == 3
    assert spec.num_dense_layers == 3 and spec.num_moe_layers == 58
    assert spec.ffn.intermediate_size == 18432
    assert (spec.moe.num_experts, spec.moe.top_k, spec.moe.expert_intermediate_size) == (256, 8, 2048)
    assert (spec.moe.num_shared_experts, spec.moe.shared_intermediate_size) == (1, 2048)
    assert '"quant_method": "fp8"' in spec.notes and spec.native_dtype == "bf16"


def test_deepseek_shared_experts_width_keeps_count_exact() -> None:
    """n_shared_experts=2 is one MLP of width 2*moe_intermediate_size: same count as two experts."""
    two = model_from_hf_config(config("deepseek-v3") | {"n_shared_experts": 2})
    one = imported("deepseek-v3")
    assert two.moe is not None and two.moe.shared_intermediate_size == 4096
    per_layer_extra = 3 * one.hidden_size * 2048
    assert two.param_count() - one.param_count() == 58 * per_layer_extra


@pytest.mark.parametrize("slug", ["mixtral-8x7b", "mixtral-8x22b"])
def test_mixtral_eight_experts_top_two(slug: str) -> None:
    spec = imported(slug)
    assert spec.moe is not None
    assert (spec.moe.num_experts, spec.moe.top_k, spec.moe.first_dense_layers) == (8, 2, 0)
    assert spec.moe.expert_intermediate_size == config(slug)["intermediate_size"]
    assert spec.attention.sliding_window is None


def test_mistral_and_phi3_sliding_window_on_every_layer() -> None:
    mistral, phi = imported("mistral-7b"), imported("phi-3-mini-4k")
    assert mistral.attention.sliding_window == 4096 and set(mistral.layer_kinds()) == {"local"}
    # HF Phi3Attention passes config.sliding_window (2047) to every layer.
    assert phi.attention.sliding_window == 2047 and set(phi.layer_kinds()) == {"local"}
    assert phi.attention.kind == "mha" and phi.attention.head_dim == 96


@pytest.mark.parametrize(
    ("slug", "kv"),
    [
        ("llama-3.1-70b", 2 * 8 * 128),
        ("llama-2-7b", 2 * 32 * 128),
        ("mistral-7b", 2 * 8 * 128),
        ("qwen2.5-7b", 2 * 4 * 128),
        ("qwen3-30b-a3b", 2 * 4 * 128),
        ("gemma-2-9b", 2 * 8 * 256),
        ("gpt-oss-120b", 2 * 8 * 64),
        ("deepseek-v3", 512 + 64),
    ],
)
def test_kv_elements_per_token_per_layer(slug: str, kv: int) -> None:
    assert imported(slug).kv_elements_per_token_per_layer() == kv


# ---- keys, defaults, nesting ------------------------------------------------------------------
def test_defaults_for_absent_keys() -> None:
    cfg = config("llama-2-7b")
    del cfg["num_key_value_heads"], cfg["tie_word_embeddings"]
    spec = model_from_hf_config(cfg)
    assert spec.attention.num_kv_heads == 32 and not spec.tie_word_embeddings


def test_llama_biases() -> None:
    spec = model_from_hf_config(config("llama-3.1-8b") | {"attention_bias": True, "mlp_bias": True})
    assert spec.attention.qkv_bias and spec.attention.o_bias and spec.ffn.bias
    base = imported("llama-3.1-8b")
    per_layer = (4096 + 2 * 1024) + 4096 + (2 * 14336 + 4096)
    assert spec.param_count() - base.param_count() == 32 * per_layer


def test_default_name_from_name_or_path_and_stem() -> None:
    assert model_from_hf_config(FIXTURES / "Llama-2-7b-hf.json").name == "llama-2-7b-hf"
    spec = model_from_hf_config(FIXTURES / "Llama-2-7b-hf.json")
    assert spec.hf_repo == "meta-llama/Llama-2-7b-hf" and spec.display_name == "Llama-2-7b-hf"
    assert model_from_hf_config(FIXTURES / "Qwen2.5-72B.json").name == "qwen2.5-72b"
    assert model_from_hf_config(config("qwen2.5-72b")).name == "qwen2"  # dict without _name_or_path


def test_text_config_nesting() -> None:
    inner = config("llama-3.1-8b")
    del inner["architectures"]
    wrapped = {"architectures": ["LlavaForConditionalGeneration"], "model_type": "llava", "text_config": inner}
    spec = model_from_hf_config(wrapped, name="llava-text")
    assert spec.architecture == "LlamaForCausalLM"
    assert spec.model_dump(exclude=_METADATA) == imported("llama-3.1-8b").model_dump(exclude=_METADATA)


def test_text_config_with_supported_outer_architecture() -> None:
    inner = config("mistral-7b")
    wrapped = {"architectures": inner.pop("architectures"), "text_config": inner}
    assert model_from_hf_config(wrapped).param_count() == imported("mistral-7b").param_count()


def test_unsupported_architecture_lists_supported() -> None:
    cfg = config("llama-2-7b") | {"architectures": ["FalconForCausalLM"]}
    with pytest.raises(SpecError) as err:
        model_from_hf_config(cfg)
    msg = str(err.value)
    assert "FalconForCausalLM" in msg and all(a in msg for a in SUPPORTED)


def test_unsupported_nested_architecture() -> None:
    wrapped = {"architectures": ["WhisperForConditionalGeneration"], "text_config": {"model_type": "whisper"}}
    with pytest.raises(SpecError, match=r"WhisperForConditionalGeneration.*LlamaForCausalLM"):
        model_from_hf_config(wrapped)


@pytest.mark.parametrize(
    ("slug", "key"),
    [
        ("llama-2-7b", "hidden_size"),
        ("llama-2-7b", "num_attention_heads"),
        ("mixtral-8x7b", "num_local_experts"),
        ("qwen3-30b-a3b", "moe_intermediate_size"),
        ("deepseek-v3", "kv_lora_rank"),
        ("deepseek-v3", "first_k_dense_replace"),
        ("gpt-oss-120b", "layer_types"),
        ("gemma-2-9b", "sliding_window"),
    ],
)
def test_missing_required_key_is_named(slug: str, key: str) -> None:
    cfg = config(slug)
    del cfg[key]
    with pytest.raises(SpecError, match=f"'{key}'") as err:
        model_from_hf_config(cfg)
    assert cfg["architectures"][0] in str(err.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [("hidden_size", "4096"), ("num_hidden_layers", 0), ("vocab_size", 3.5), ("tie_word_embeddings", "no")],
)
def test_wrong_typed_key_is_named(key: str, value: object) -> None:
    with pytest.raises(SpecError, match=key):
        model_from_hf_config(config("llama-2-7b") | {key: value})


def test_head_dim_needed_when_heads_do_not_divide_hidden() -> None:
    with pytest.raises(SpecError, match="'head_dim'"):
        model_from_hf_config(config("llama-2-7b") | {"num_attention_heads": 24, "num_key_value_heads": 24})
    spec = model_from_hf_config(
        config("llama-2-7b") | {"num_attention_heads": 24, "num_key_value_heads": 24, "head_dim": 128}
    )
    assert spec.attention.head_dim == 128


def test_qwen3_non_leading_dense_layers_rejected() -> None:
    with pytest.raises(SpecError, match="leading"):
        model_from_hf_config(config("qwen3-30b-a3b") | {"mlp_only_layers": [5]})
    with pytest.raises(SpecError, match="leading"):
        model_from_hf_config(config("qwen3-30b-a3b") | {"decoder_sparse_step": 2})
    spec = model_from_hf_config(config("qwen3-30b-a3b") | {"mlp_only_layers": [0, 1]})
    assert spec.moe is not None and spec.moe.first_dense_layers == 2 and spec.ffn.intermediate_size == 6144


def test_gpt_oss_top_k_keys_must_agree() -> None:
    with pytest.raises(SpecError, match="experts_per_token"):
        model_from_hf_config(config("gpt-oss-120b") | {"experts_per_token": 2})


def test_bad_json_names_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{\n  "architectures": ["LlamaForCausalLM"],\n  "hidden_size": 4096,,\n}\n')
    with pytest.raises(SpecError, match=r"config\.json is not valid JSON at line 3"):
        model_from_hf_config(bad)
    with pytest.raises(SpecError, match="cannot read"):
        model_from_hf_config(tmp_path / "missing.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(SpecError, match="JSON object"):
        model_from_hf_config(tmp_path / "list.json")


def test_input_dict_is_not_modified() -> None:
    cfg = config("deepseek-v3")
    before = copy.deepcopy(cfg)
    model_from_hf_config(cfg)
    assert cfg == before


def test_spec_errors_are_roofline_errors() -> None:
    with pytest.raises(RooflineError):
        model_from_hf_config({"architectures": "LlamaForCausalLM"})
