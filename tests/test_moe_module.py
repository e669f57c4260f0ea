"""The kernels an engine's MoE module launches inside one timed AIC call are netted out of the fit and paid once."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from calibrate.aic.moe import fit_grouped, moe_ops_for_rows, moe_rows, moe_table, with_grouped
from calibrate.aic.moe_module import module_kernels
from calibrate.aic.tables import load_table
from roofline.evaluate import launch_overhead_s
from roofline.ops.records import elementwise
from roofline.profile import CalibrationProfile, GroupedGemm, default_profile
from roofline.specs.library import hardware

HW = hardware("h100-sxm")
GAP_S = 3e-6  # per engine kernel in a graph replay


def _engine_counting() -> CalibrationProfile:
    """The default profile with its graph gap paid per engine kernel (as the engine-kernel profiles are)."""
    base = default_profile()
    over = base.overheads.model_copy(update={"per_kernel_graph_s": GAP_S, "graph_kernels": "engine"})
    return base.model_copy(update={"overheads": over, "grouped_gemm": GroupedGemm()})


@pytest.mark.parametrize(
    ("engine", "fmt", "expected"),
    [
        # vLLM: gate_up 1 + moe.align_block_size 2 + router extras (fp32 cast 1, topk_softmax 1, renormalise 2);
        # act 1; down 1 + moe.moe_sum 1 (roofline/data/kernel_inventory/vllm.yaml)
        ("vllm", "bf16", (7, 1, 2)),
        # + quant.moe_act_quant before each grouped GEMM
        ("vllm", "fp8-block", (8, 1, 3)),
        # SGLang: gate_up 1 + moe.align_block_size 1 (decode) + moe.topk 1; down 1 + moe.sum_reduce 1
        ("sglang", "bf16", (3, 1, 2)),
        # TensorRT-LLM: gate_up 1 + moe.expert_maps_sort 1 + moe.expand_permute 1 + moe.routing 1; down 1 + finalize 1
        ("trtllm", "bf16", (4, 1, 2)),
    ],
)
def test_module_kernels_are_the_inventorys_hand_sum(engine: str, fmt: str, expected: tuple[int, int, int]) -> None:
    assert module_kernels(engine, fmt, True, 4096) == expected


def test_an_engine_without_an_inventory_keeps_one_kernel_per_op() -> None:
    assert module_kernels("ideal", "bf16", True, 4096) is None


def _rows(framework: str, tokens: tuple[int, ...] = (1, 8, 16, 32, 64, 128)) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "framework": framework,
            "kernel": "vllm_unquantizedfusedmoe_triton_tritonexperts",
            "moe_dtype": "bfloat16",
            "num_tokens": np.asarray(tokens, dtype=np.float64),
            "hidden_size": 4096.0,
            "inter_size": 14336.0,
            "topk": 2.0,
            "num_experts": 8.0,
            "moe_tp_size": 1.0,
            "moe_ep_size": 1.0,
            "distribution": "balanced",
        }
    )


def test_the_ops_carry_the_module_kernels_and_pay_them_in_a_graph() -> None:
    """vLLM rows: 7 + 1 + 2 kernels at the graph gap; engine-less rows: one per op (3 in all)."""
    prof = _engine_counting()
    ops, plain = (
        moe_ops_for_rows(_rows("vllm"), HW, "bfloat16", engine="vllm"),
        moe_ops_for_rows(_rows(""), HW, "bfloat16"),
    )
    assert ops is not None and plain is not None
    assert (ops.gate_up.engine_kernels, ops.act.engine_kernels, ops.down.engine_kernels) == (7, 1, 2)
    paid = sum(float(np.max(launch_overhead_s(op, prof))) for op in (ops.gate_up, ops.act, ops.down))
    once = sum(float(np.max(launch_overhead_s(op, prof))) for op in (plain.gate_up, plain.act, plain.down))
    assert paid == pytest.approx(10 * GAP_S) and once == pytest.approx(3 * GAP_S)


def test_the_layer_fit_nets_the_module_kernels_out(tmp_path: Path) -> None:
    """Rows built as kernel seconds + act + the module's 10 kernels at the gap: the measured layer times are the
    kernel seconds (not + 7 gaps), and priced back (which pays the 10 kernels again, once) every row is exact."""
    prof = _engine_counting()
    rows = _rows("vllm")
    ops = moe_ops_for_rows(rows, HW, "bfloat16", engine="vllm")
    assert ops is not None
    up, act, down = ops.timings(HW, prof)
    kernel_s = 1e-4 + 1e-6 * rows["num_tokens"].to_numpy()  # rises with the tokens: every knot kept
    measured_s = kernel_s + act.time_s + up.overhead_s + down.overhead_s
    table = rows.rename(columns={"kernel": "kernel_source"}).drop(columns="framework")
    table = table.assign(framework="VLLM", version="0.24.0", device="H100", op_name="moe", latency=measured_s * 1e3)
    path = tmp_path / "h100_sxm" / "moe" / "vllm" / "0.24.0" / "moe_perf.parquet"
    path.parent.mkdir(parents=True)
    table.to_parquet(path, index=False)
    df = load_table(moe_table("h100_sxm", "vllm", root=tmp_path))
    fit = fit_grouped(df, HW, prof)
    layer = fit.grouped.layers["bf16:2.0|h4096.i14336.e8.k2.gated"]
    np.testing.assert_allclose(layer.y, [float(f"{v:.4g}") for v in kernel_s])
    priced = moe_rows(df, HW, with_grouped(prof, fit))
    np.testing.assert_allclose(priced["ratio"], 1.0, rtol=5e-4)  # knots rounded to 4 significant digits


def test_eager_gpu_gap_is_paid_on_the_engine_count_only_under_run_ahead() -> None:
    """An eager op with 3 engine kernels: run-ahead pays 3 gaps on the GPU (its host cost is apart); additive pays
    the end-to-end per-op cost once (one kernel per op, as it was fitted)."""
    op = elementwise("moe.experts_act", "moe", "x", 1, "bf16", np.float64(1e3), 3.0, 2.0, 4.0)
    op = replace(op, launch="eager", engine_kernels=3)
    run_ahead = _engine_counting()
    additive = run_ahead.model_copy(
        update={"overheads": run_ahead.overheads.model_copy(update={"eager_launch": "additive", "per_kernel_s": 2e-5})}
    )
    assert float(launch_overhead_s(op, run_ahead)) == pytest.approx(3 * GAP_S)
    assert float(launch_overhead_s(op, additive)) == pytest.approx(2e-5 * op.kernels)
