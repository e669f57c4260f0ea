"""``predict`` and ``sweep`` give bit-identical results across the speed work of issue #28.

The reference values in ``tests/fixtures/predict_bits.json`` were recorded from the code before that work:
every field of :meth:`PredictionResult.summary` (floats as ``float.hex``), the per-step decode times and the
per-op breakdown (SHA-256 of their exact text), and the CSV of a small sweep. Re-record them only when the
physics changes on purpose: ``python tests/test_predict_identical.py``.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

import roofline
from roofline import grid

FIXTURE = Path(__file__).with_name("fixtures") / "predict_bits.json"

#: (label, model, hardware, predict keyword arguments): dense, MoE, MLA, hybrid, out of memory, O = 1 and 2,
#: pp, other engines, low-precision formats, speculative decoding.
CASES: list[tuple[str, str, str, dict[str, Any]]] = [
    ("70b-tp4", "llama-3.1-70b", "h100-sxm", {"batch": 8, "prompt_len": 2048, "output_len": 256, "tp": 4}),
    ("8b-default", "llama-3.1-8b", "h100-sxm", {}),
    ("70b-oom", "llama-3.1-70b", "h100-sxm", {"batch": 64, "prompt_len": 8192, "output_len": 64}),
    ("8b-o1", "llama-3.1-8b", "a100-80gb-sxm", {"batch": 4, "prompt_len": 512, "output_len": 1}),
    ("8b-o2", "llama-3.1-8b", "l40s", {"batch": 2, "prompt_len": 100, "output_len": 2}),
    ("mixtral-tp2", "mixtral-8x7b", "mi300x", {"batch": 16, "prompt_len": 1000, "output_len": 50, "tp": 2}),
    ("dsv3-tp8", "deepseek-v3", "h200-sxm", {"batch": 32, "prompt_len": 4096, "output_len": 300, "tp": 8}),
    ("gpt-oss-20b", "gpt-oss-20b", "h100-sxm", {"batch": 8, "prompt_len": 3000, "output_len": 200}),
    ("qwen3.5-tp8", "qwen3.5-397b-a17b", "b200", {"batch": 4, "prompt_len": 2048, "output_len": 128, "tp": 8}),
    ("nemotron-h", "nemotron-3-super-120b-a12b", "h100-sxm", {"batch": 8, "output_len": 64, "tp": 2}),
    ("gemma2-sglang", "gemma-2-9b", "h100-sxm", {"batch": 8, "prompt_len": 6000, "output_len": 40, "engine": "sglang"}),
    ("70b-pp2-fp8", "llama-3.1-70b", "h100-sxm", {"pp": 2, "tp": 2, "weight_dtype": "fp8", "kv_dtype": "fp8"}),
    ("8b-eager-trt", "llama-3.1-8b", "h100-sxm", {"engine": "trtllm", "cuda_graphs": False, "output_len": 33}),
    ("qwen3-ep4", "qwen3-30b-a3b", "h100-sxm", {"batch": 64, "prompt_len": 512, "output_len": 100, "tp": 4, "ep": 4}),
    ("8b-eagle", "llama-3.1-8b", "h100-sxm", {"batch": 1, "output_len": 256, "speculative": "eagle:k=4,alpha=0.8"}),
]
SWEEP = ("llama-3.1-70b", "h100-sxm", {"batch": [1, 8, 64, 512], "prompt_len": [16, 2048, 32768], "tp": [1, 4]})


def _bits(value: object) -> object:
    """An exact, JSON-safe form of one summary value: floats as ``float.hex`` (NaN as ``"nan"``)."""
    if isinstance(value, float):
        return "nan" if math.isnan(value) else value.hex()
    return value


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def snapshot(model: str, hardware: str, kw: dict[str, Any]) -> dict[str, object]:
    """Every summary field, the digest of the per-step times (``repr`` of each float) and of the op table."""
    r = roofline.predict(model, hardware, **kw)
    out = {k: _bits(v) for k, v in r.summary().items()}
    out["tpot_steps_s"] = _digest(",".join(repr(float(x)) for x in np.asarray(r.tpot_steps_s).ravel()))
    out["ops"] = _digest(r.ops.to_csv(index=False))
    return out


def sweep_csv() -> str:
    """The CSV ``sweep`` of :data:`SWEEP` writes (floats at full precision)."""
    return str(roofline.sweep(SWEEP[0], SWEEP[1], **SWEEP[2]).to_csv(index=False))


@pytest.fixture(scope="module")
def reference() -> dict[str, Any]:
    return dict(json.loads(FIXTURE.read_text()))


@pytest.mark.parametrize(("label", "model", "hardware", "kw"), CASES, ids=[c[0] for c in CASES])
def test_predict_is_bit_identical(
    label: str, model: str, hardware: str, kw: dict[str, Any], reference: dict[str, Any]
) -> None:
    got, want = snapshot(model, hardware, kw), reference["predict"][label]
    assert list(got) == list(want)
    for name, value in want.items():
        assert got[name] == value, name


def test_sweep_csv_is_identical(reference: dict[str, Any]) -> None:
    assert _digest(sweep_csv()) == reference["sweep_csv"]


@pytest.mark.parametrize(
    ("model", "hardware", "kw"),
    [
        (*SWEEP[:2], {**SWEEP[2], "output_len": [1, 2, 3, 100], "engine": "sglang"}),  # overlapped CPU steps
        ("deepseek-v3", "h200-sxm", {"batch": list(range(1, 200, 9)), "prompt_len": [16, 9000], "tp": 8}),
        ("nemotron-3-super-120b-a12b", "h100-sxm", {"batch": [1, 5, 40], "output_len": [2, 77], "tp": [2, 4]}),
    ],
    ids=["70b-sglang", "dsv3", "nemotron-h"],
)
def test_sweep_pieces_give_the_same_frame(
    model: str, hardware: str, kw: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The grid evaluated one batch row at a time (:data:`roofline.grid.CHUNK_POINTS` = 1) is the frame of one
    piece, float for float and dtype for dtype."""
    whole = roofline.sweep(model, hardware, **kw)
    monkeypatch.setattr(grid, "CHUNK_POINTS", 1)
    pieces = roofline.sweep(model, hardware, **kw)
    pd.testing.assert_frame_equal(pieces, whole, check_exact=True)
    assert pieces.to_csv(index=False) == whole.to_csv(index=False)


if __name__ == "__main__":
    record = {
        "predict": {label: snapshot(m, hw, kw) for label, m, hw, kw in CASES},
        "sweep_csv": _digest(sweep_csv()),
    }
    FIXTURE.write_text(json.dumps(record, indent=1, sort_keys=False) + "\n")
    print(f"wrote {FIXTURE}")
