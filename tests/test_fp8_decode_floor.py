"""A decode call from an fp8 KV cache pays its own floor (``attention.decode_fixed_by_kv``), fitted from its own
latency-bound calls; 16-bit caches and MLA keep theirs."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from calibrate.aic.compare import gqa_op
from calibrate.aic.latency import LATENCY_SHARE, fit_attention_floor
from roofline.evaluate import op_time
from roofline.ops.builder import decode_ops
from roofline.profile import CalibrationProfile, default_profile
from roofline.specs.library import hardware, model
from roofline.specs.precision import Precision
from roofline.specs.scenario import Scenario

HW = hardware("h100-sxm")
BF16_FLOOR_S, FP8_FLOOR_S = 7e-6, 13e-6


def _with_floors(prof: CalibrationProfile, by_kv: dict[str, float]) -> CalibrationProfile:
    att = prof.attention.model_copy(update={"decode_fixed_s": BF16_FLOOR_S, "decode_fixed_by_kv": by_kv})
    return prof.model_copy(update={"attention": att})


@pytest.mark.parametrize(("kv", "floor_s"), [(Precision.BF16, BF16_FLOOR_S), (Precision.FP8, FP8_FLOOR_S)])
def test_each_cache_format_pays_its_own_decode_floor(kv: Precision, floor_s: float) -> None:
    """Llama-3.1-8B decode, 4 sequences at 300 tokens: the attention op's time with the floors − without is the
    floor of its cache's format; no other op moves."""
    prof = default_profile()
    floors, none = _with_floors(prof, {"fp8": FP8_FLOOR_S}), _with_floors(prof, {"fp8": 0.0})
    none = none.model_copy(update={"attention": none.attention.model_copy(update={"decode_fixed_s": 0.0})})
    for op in decode_ops(
        model("llama-3.1-8b"), Scenario(batch=4, prompt_len=256, output_len=8, kv_dtype=kv), HW, 300.0
    ):
        gap = float(np.max(op_time(op, HW, floors).time_s - op_time(op, HW, none).time_s))
        assert gap == pytest.approx(floor_s if op.name == "attn.core" else 0.0, abs=1e-15), op.name


def _generation_rows(kv_dtype: str, excess_s: float, prof: CalibrationProfile) -> pd.DataFrame:
    """Latency-bound decode calls (batch × (past + 1) ≤ 1024) timed at work + one kernel's gap + ``excess_s``."""
    rows = pd.DataFrame(
        {
            "phase": "decode",
            "batch": np.array([1.0, 2.0, 4.0, 8.0] * 4),
            "new_tokens": 1.0,
            "past": np.repeat([15.0, 31.0, 63.0, 100.0], 4),
            "q_heads": 32.0,
            "kv_heads": 8.0,
            "head_dim": 128.0,
            "window": np.inf,
            "beam_width": 1,
            "dtype": "bfloat16",
            "kv_dtype": kv_dtype,
        }
    )
    t = op_time(gqa_op(rows, HW), HW, prof)
    work = np.maximum(np.asarray(t.memory_s), np.asarray(t.compute_s))
    rows["time_s"] = work + prof.overheads.per_kernel_graph_s + excess_s
    assert (work < LATENCY_SHARE * rows["time_s"]).all()
    return rows


def test_the_fp8_floor_is_fitted_from_the_fp8_calls_only() -> None:
    """A table whose 16-bit calls carry 7 µs and fp8 calls 13 µs beyond work + gap: each fit recovers its own."""
    prof = default_profile()
    table = pd.concat([_generation_rows("bfloat16", BF16_FLOOR_S, prof), _generation_rows("fp8", FP8_FLOOR_S, prof)])
    bf16 = fit_attention_floor(table, HW, prof, "synthetic")
    fp8 = fit_attention_floor(table, HW, prof, "synthetic", kv_dtype="fp8")
    assert bf16 is not None and fp8 is not None
    assert bf16.field == "attention.decode_fixed_s" and fp8.field == "attention.decode_fixed_by_kv.fp8"
    assert bf16.value_s == pytest.approx(BF16_FLOOR_S, rel=1e-9) and fp8.value_s == pytest.approx(FP8_FLOOR_S, rel=1e-9)
