"""SGLang runs DeepSeek-V3's one shared expert as the 257th expert of the routed grouped GEMM (no MLP of its own)."""

from __future__ import annotations

import numpy as np
import pytest

import roofline
from roofline.engine.presets import resolve_engine
from roofline.ops.builder import decode_ops
from roofline.ops.ffn import routed_rows
from roofline.ops.records import Op
from roofline.specs.library import hardware, model
from roofline.specs.scenario import Scenario

HW = hardware("h200-sxm")


def _decode(engine: str, batch: int = 64, ep: int = 1, model_name: str = "deepseek-v3") -> list[Op]:
    m = model(model_name)
    sc = Scenario(batch=batch, prompt_len=1024, output_len=2, tp=8, ep=ep, engine=resolve_engine(engine, HW))
    return decode_ops(m, sc, HW, 1025.0)


def _moe_layer(ops: list[Op]) -> dict[str, Op]:
    return {o.name: o for o in ops if o.layer_kind == "global_moe" and o.group == "moe"}


def test_sglang_fuses_the_shared_expert_into_the_routed_gemm() -> None:
    """Batch 64 at tp 8: uniform routing touches 256·(1 − (1 − 8/256)^64) ≈ 221.3 experts with 512 assignments;
    fused, 222.3 experts and 576 assignments (every token also to the shared expert), and the shared MLP is gone.
    FLOPs and weight bytes of the layer's expert GEMMs are conserved: the fused GEMM holds exactly what the shared
    MLP computed and read."""
    fused, plain = _moe_layer(_decode("sglang")), _moe_layer(_decode("vllm"))
    assert not any(n.startswith("moe.shared") for n in fused)
    assert {"moe.shared.gate_up_proj", "moe.shared.act", "moe.shared.down_proj"} <= set(plain)
    touched, assignments, _ = routed_rows(256.0, 8.0, 1.0, 64.0)
    up = fused["moe.experts_gate_up"]
    assert float(np.asarray(up.m)) == pytest.approx((assignments + 64.0) / (touched + 1.0))
    i, h = 2048 / 8, 7168
    assert float(np.asarray(up.flops)) == pytest.approx(2.0 * (assignments + 64.0) * 2 * i * h)
    for a, b in (("gate_up", "gate_up_proj"), ("down", "down_proj")):
        f, p, s = fused[f"moe.experts_{a}"], plain[f"moe.experts_{a}"], plain[f"moe.shared.{b}"]
        assert float(np.asarray(f.flops)) == pytest.approx(float(np.asarray(p.flops + s.flops)))
        assert float(np.asarray(f.weight_bytes)) == pytest.approx(float(np.asarray(p.weight_bytes + s.weight_bytes)))


@pytest.mark.parametrize(
    ("engine", "ep", "model_name"),
    [
        ("vllm", 1, "deepseek-v3"),
        ("trtllm", 1, "deepseek-v3"),
        ("sglang", 8, "deepseek-v3"),
        ("sglang", 1, "kimi-k2.5"),
    ],
)
def test_no_fusion_outside_the_engines_rule(engine: str, ep: int, model_name: str) -> None:
    """Other engines keep the shared MLP; SGLang too under expert parallelism (its rule: no EP MoE) and for
    Kimi-K2.5 (384 routed experts: not in the allow-list)."""
    assert "moe.shared.gate_up_proj" in _moe_layer(_decode(engine, ep=ep, model_name=model_name))


def test_the_preset_cites_its_rule_and_predict_gets_faster_by_the_shared_mlps_launches() -> None:
    """The SGLang preset names the architectures and cites the source; at batch 4 the decode step loses the shared
    MLP's three launches per MoE layer (58 layers) and gains a sliver of grouped-GEMM work, so TPOT falls."""
    eng = resolve_engine("sglang", HW)
    assert ("DeepseekV3ForCausalLM", 256) in eng.shared_expert_fusion
    assert "determine_num_fused_shared_experts" in eng.sources["shared_expert_fusion"]
    off = eng.model_copy(update={"shared_expert_fusion": ()})
    on = roofline.predict("deepseek-v3", "h200-sxm", 4, 1024, 16, tp=8, engine=eng)
    plain = roofline.predict("deepseek-v3", "h200-sxm", 4, 1024, 16, tp=8, engine=off)
    assert on.tpot_s < plain.tpot_s
