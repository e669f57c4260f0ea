"""Bad spec input: every mistake is a RooflineError whose message names the field.

Hardware tests use only ``h100-sxm.yaml`` (the one hardware spec guaranteed to exist).
"""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import roofline
from roofline.errors import RooflineError, SpecError, UnknownNameError
from roofline.specs.hardware import HardwareSpec
from roofline.specs.hf_import import model_from_hf_config
from roofline.specs.library import load_spec_file, spec_path
from roofline.specs.model import ModelSpec

FIXTURES = Path(__file__).parent / "fixtures" / "configs"
HW_TEXT = spec_path("hardware", "h100-sxm").read_text()
MODEL_TEXT = spec_path("model", "llama-3.1-8b").read_text()


def hw() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(HW_TEXT)
    return data


def mdl() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(MODEL_TEXT)
    return data


def load(cls: type[HardwareSpec] | type[ModelSpec], data: Any, tmp_path: Path) -> Any:
    path = tmp_path / "spec.yaml"
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
    return load_spec_file(cls, path)


def expect_error(cls: type[HardwareSpec] | type[ModelSpec], data: Any, tmp_path: Path, *words: str) -> str:
    with pytest.raises(SpecError) as err:
        load(cls, data, tmp_path)
    msg = str(err.value)
    for word in words:
        assert word in msg, f"{word!r} not in {msg!r}"
    return msg


def test_valid_specs_load(tmp_path: Path) -> None:
    assert load(HardwareSpec, HW_TEXT, tmp_path).name == "h100-sxm"
    assert load(ModelSpec, MODEL_TEXT, tmp_path).name == "llama-3.1-8b"


# ---- YAML and structure -------------------------------------------------------------------
def test_malformed_yaml_names_line(tmp_path: Path) -> None:
    expect_error(ModelSpec, "name: x\nattention: [unclosed\nffn: {}\n", tmp_path, "not valid YAML", "line")
    expect_error(HardwareSpec, "name: h\n  memory: 80 GB\n bad", tmp_path, "not valid YAML", "line 2")


@pytest.mark.parametrize("doc", ["", "- a\n- b\n", "just a string\n", "42\n"])
def test_non_mapping_document(tmp_path: Path, doc: str) -> None:
    expect_error(ModelSpec, doc, tmp_path, "must be a mapping")


def test_wrong_types(tmp_path: Path) -> None:
    d = mdl()
    d["num_layers"] = "many"
    expect_error(ModelSpec, d, tmp_path, "field 'num_layers'")
    d = mdl()
    d["attention"]["qkv_bias"] = "sometimes"
    expect_error(ModelSpec, d, tmp_path, "field 'attention.qkv_bias'")
    d = mdl()
    d["attention"] = [1, 2]
    expect_error(ModelSpec, d, tmp_path, "field 'attention'")
    h = hw()
    h["peak_dense"]["bf16"] = ["989.5 TFLOPS"]
    expect_error(HardwareSpec, h, tmp_path, "field 'peak_dense.bf16'")


@pytest.mark.parametrize("path", [("hidden_size",), ("attention", "head_dim"), ("ffn", "intermediate_size")])
def test_missing_fields(tmp_path: Path, path: tuple[str, ...]) -> None:
    d = mdl()
    parent = d
    for key in path[:-1]:
        parent = parent[key]
    del parent[path[-1]]
    expect_error(ModelSpec, d, tmp_path, f"field '{'.'.join(path)}'", "missing")


def test_missing_hardware_memory(tmp_path: Path) -> None:
    h = hw()
    del h["memory"]
    expect_error(HardwareSpec, h, tmp_path, "field 'memory'", "missing")


@pytest.mark.parametrize(
    ("field", "value"), [("hidden_size", 0), ("num_layers", -1), ("vocab_size", 0), ("norms_per_layer", -2)]
)
def test_nonpositive_model_sizes(tmp_path: Path, field: str, value: int) -> None:
    d = mdl()
    d[field] = value
    expect_error(ModelSpec, d, tmp_path, f"field '{field}'")


@pytest.mark.parametrize(("field", "value"), [("capacity", "-80 GB"), ("bandwidth", "0 TB/s")])
def test_nonpositive_hardware_sizes(tmp_path: Path, field: str, value: str) -> None:
    h = hw()
    h["memory"][field] = value
    expect_error(HardwareSpec, h, tmp_path, f"field 'memory.{field}'")


def test_heads_not_divisible_by_kv_heads(tmp_path: Path) -> None:
    d = mdl()
    d["attention"]["num_kv_heads"] = 5
    expect_error(ModelSpec, d, tmp_path, "field 'attention'", "num_kv_heads (5)", "multiple")


@pytest.mark.parametrize(("kind", "says"), [("mha", "'gqa'"), ("mqa", "'gqa'"), ("mla", "'gqa'")])
def test_wrong_attention_kind(tmp_path: Path, kind: str, says: str) -> None:
    d = mdl()
    d["attention"]["kind"] = kind
    expect_error(ModelSpec, d, tmp_path, "field 'attention'", "kind", says)


def test_unknown_attention_kind(tmp_path: Path) -> None:
    d = mdl()
    d["attention"]["kind"] = "linear"
    expect_error(ModelSpec, d, tmp_path, "field 'attention.kind'")


def test_implausible_head_dim(tmp_path: Path) -> None:
    d = mdl()
    d["attention"]["head_dim"] = 4  # 32 heads * 4 = 128 << 4096 / 8
    expect_error(ModelSpec, d, tmp_path, "head_dim", "implausibly small")


def test_moe_inconsistent(tmp_path: Path) -> None:
    d = mdl()
    d["moe"] = {"num_experts": 8, "top_k": 9, "expert_intermediate_size": 1024}
    expect_error(ModelSpec, d, tmp_path, "field 'moe'", "top_k")


# ---- units ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("field", "value", "word"),
    [
        ("capacity", "80 GBs", "unknown or missing unit"),
        ("capacity", "80 gigabytes", "unknown or missing unit"),
        ("bandwidth", "3.35 TB", "unknown or missing unit"),
        ("bandwidth", 3.35, "bare number"),
        ("capacity", 80, "bare number"),
        ("capacity", "eighty GB", "cannot read"),
    ],
)
def test_bad_units(tmp_path: Path, field: str, value: object, word: str) -> None:
    h = hw()
    h["memory"][field] = value
    expect_error(HardwareSpec, h, tmp_path, f"field 'memory.{field}'", word)


def test_bare_number_in_raw_yaml(tmp_path: Path) -> None:
    text = HW_TEXT.replace("bandwidth: 3.35 TB/s", "bandwidth: 3.35")
    assert text != HW_TEXT
    expect_error(HardwareSpec, text, tmp_path, "field 'memory.bandwidth'", "bare number")


def test_gb_and_gib_differ(tmp_path: Path) -> None:
    caps = {}
    for unit in ("GB", "GiB"):
        h = hw()
        h["memory"]["capacity"] = f"80 {unit}"
        h["memory"].pop("visible_capacity", None)  # 81,559 MiB would exceed 80 GB: rejected, see below
        caps[unit] = load(HardwareSpec, h, tmp_path).memory.capacity_bytes
    assert caps["GB"] == 80e9 and caps["GiB"] == 80 * 2**30
    assert caps["GB"] != caps["GiB"]
    h = hw()
    h["memory"]["capacity"] = "80 GB"
    with pytest.raises(SpecError, match="visible_capacity"):
        load(HardwareSpec, h, tmp_path)


# ---- names and unknown fields -----------------------------------------------------------------
def test_unknown_hardware_name_suggests() -> None:
    with pytest.raises(UnknownNameError, match="h100-sxm"):
        roofline.hardware("h100")


def test_unknown_model_name_suggests() -> None:
    with pytest.raises(UnknownNameError, match=r"llama-3\.1-70b"):
        roofline.model("llama-3.1-70")


def test_missing_spec_file() -> None:
    with pytest.raises(SpecError, match="does not exist"):
        roofline.model("/nonexistent/model.yaml")


@pytest.mark.parametrize("where", ["top", "attention", "memory"])
def test_unknown_field_rejected(tmp_path: Path, where: str) -> None:
    if where == "memory":
        h = hw()
        h["memory"]["capacty"] = "80 GB"
        expect_error(HardwareSpec, h, tmp_path, "field 'memory.capacty'", "unknown field")
        return
    d = mdl()
    (d if where == "top" else d["attention"])["num_expert"] = 8
    name = "num_expert" if where == "top" else "attention.num_expert"
    expect_error(ModelSpec, d, tmp_path, f"field '{name}'", "unknown field")


def test_errors_are_roofline_errors() -> None:
    assert issubclass(SpecError, RooflineError) and issubclass(UnknownNameError, RooflineError)


# ---- property tests ----------------------------------------------------------------------------
def _load_text(cls: type[HardwareSpec] | type[ModelSpec], text: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "spec.yaml"
        path.write_text(text, encoding="utf-8")
        with contextlib.suppress(RooflineError):
            load_spec_file(cls, path)


_SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@_SETTINGS
@given(text=st.text(max_size=400), model=st.booleans())
def test_random_text_only_raises_roofline_errors(text: str, model: bool) -> None:
    _load_text(ModelSpec if model else HardwareSpec, text)


@_SETTINGS
@given(data=st.data(), model=st.booleans())
def test_truncated_specs_only_raise_roofline_errors(data: st.DataObject, model: bool) -> None:
    text = MODEL_TEXT if model else HW_TEXT
    cut = data.draw(st.integers(0, len(text)))
    tail = data.draw(st.text(max_size=20))
    _load_text(ModelSpec if model else HardwareSpec, text[:cut] + tail)


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**40), 2**40) | st.floats(allow_nan=True) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=12,
)
_CONFIGS = {p.stem: json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.json"))}


def _import(cfg: Any) -> None:
    with contextlib.suppress(RooflineError):
        model_from_hf_config(cfg)


@_SETTINGS
@given(cfg=st.dictionaries(st.text(max_size=12), _JSON, max_size=8))
def test_random_dicts_into_hf_import(cfg: dict[str, Any]) -> None:
    _import(cfg)


@_SETTINGS
@given(data=st.data())
def test_mutated_fixtures_into_hf_import(data: st.DataObject) -> None:
    """A real config with a few keys replaced, removed or nested into text_config."""
    cfg = copy.deepcopy(_CONFIGS[data.draw(st.sampled_from(sorted(_CONFIGS)))])
    small_ints = st.integers(-3, 200)
    for _ in range(data.draw(st.integers(1, 4))):
        key = data.draw(st.sampled_from(sorted(cfg)))
        action = data.draw(st.sampled_from(["replace", "int", "delete"]))
        if action == "delete":
            del cfg[key]
        else:
            cfg[key] = data.draw(_JSON if action == "replace" else small_ints)
    if data.draw(st.booleans()):
        cfg = {"architectures": ["SomethingForConditionalGeneration"], "text_config": cfg}
    _import(cfg)
