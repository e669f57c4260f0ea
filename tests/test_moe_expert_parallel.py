"""Expert parallelism: which collectives a MoE layer pays.

GIVEN a MoE model with experts spread over ``ep`` GPUs, WHEN its ops are built, THEN with ep <= tp
(experts spread inside the tensor-parallel group, attention tensor-parallel: every GPU already
holds all the step's tokens) the partial expert outputs are summed by the layer's all-reduce and
no all-to-all is charged, as vLLM, SGLang and TensorRT-LLM run it without attention data
parallelism; with ep > tp the routed tokens travel: one dispatch and one combine all-to-all of
M · top_k · hidden · activation bytes per GPU, (ep − 1)/ep of it on the wire.
"""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.ops import decode_ops, prefill_ops
from roofline.prediction import make_scenario


def _comm(ops: list, name: str) -> list:
    return [op for op in ops if op.name == name]


@pytest.mark.parametrize("tp,ep", [(8, 8), (8, 4), (4, 2)])
def test_ep_inside_the_tp_group_pays_no_all_to_all(tp: int, ep: int) -> None:
    m, hw = roofline.model("deepseek-v3"), roofline.hardware("h200-sxm")
    sc = make_scenario(hw, 4, 1024, 16, tp=tp, ep=ep, weight_dtype="fp8")
    for ops in (prefill_ops(m, sc, hw), decode_ops(m, sc, hw, 1024.0)):
        assert not _comm(ops, "comm.ep_all_to_all")
        # one all-reduce after attention and one after the FFN/MoE of every layer
        assert sum(op.count for op in _comm(ops, "comm.tp_all_reduce")) == 2 * m.num_layers


def test_ep_beyond_the_tp_group_dispatches_and_combines_the_routed_tokens() -> None:
    m, hw = roofline.model("qwen3-30b-a3b"), roofline.hardware("h100-sxm")
    batch, prompt = 2, 512
    sc = make_scenario(hw, batch, prompt, 16, tp=1, ep=8)
    a2a = _comm(prefill_ops(m, sc, hw), "comm.ep_all_to_all")
    assert len(a2a) == 1 and a2a[0].count == 2 * m.num_layers  # dispatch + combine per MoE layer
    tokens = batch * prompt
    message = tokens * m.moe.top_k * m.hidden_size * 2.0  # bf16 activations
    assert float(np.asarray(a2a[0].comm_bytes)) == pytest.approx(7 / 8 * message, rel=1e-12)


def test_predicted_prefill_of_an_ep_eq_tp_moe_is_not_communication_bound() -> None:
    """Qwen3.5-397B-A17B, 8192-token prompt, tp = ep = 8 on H200: the expert GEMMs, not a phantom all-to-all."""
    r = roofline.predict("qwen3.5-397b-a17b", "h200-sxm", 1, 8192, 16, tp=8, ep=8, weight_dtype="fp8")
    ops = r.ops
    pre = ops[ops.phase == "prefill"] if "phase" in ops.columns else ops
    comm_s = float(pre.loc[pre.kind == "comm", "time_s"].sum())
    assert comm_s < 0.5 * float(pre.time_s.sum())
