"""The planner tries attention DP with wide EP for MoE models and says which layout each candidate uses."""

from __future__ import annotations

import pytest

import roofline
from roofline.errors import ScenarioError
from roofline.serving.plan.layouts import DEFAULT_MAX_DP_GPUS, layouts
from roofline.serving.plan.planner import plan
from roofline.specs.library import model as load_model

REQ = {"qps": 5.0, "prompt_len": 2048, "output_len": 512, "ttft_slo_s": 2.0, "tpot_slo_s": 0.05}


def test_layouts_by_hand() -> None:
    """DeepSeek-V3 (256 experts), tp 1/2/4/8: dp 1 for every tp, and dp > 1 where ep = dp·tp divides 256 and stays
    within 32 GPUs; a dense model gets tp alone and refuses dp_options > 1 by name."""
    ds = load_model("deepseek-v3")
    got = layouts(ds, [1, 2, 4, 8])
    assert (1, 1) in got and (8, 1) in got and (1, 32) in got and (8, 4) in got
    assert all(t * d <= DEFAULT_MAX_DP_GPUS and 256 % (t * d) == 0 for t, d in got if d > 1)
    assert (8, 8) not in got  # 64 GPUs: beyond the default span
    assert layouts(ds, [8], [1, 8]) == [(8, 1), (8, 8)]  # given options: no span cap
    llama = load_model("llama-3.1-8b")
    assert layouts(llama, [1, 2]) == [(1, 1), (2, 1)]
    with pytest.raises(ScenarioError, match="dense"):
        layouts(llama, [1], [1, 2])
    with pytest.raises(ScenarioError, match="dp_options"):
        layouts(ds, [1], [0])


def test_plan_compares_dp_layouts_and_names_them() -> None:
    """GIVEN DeepSeek-V3 on H200 WHEN planned THEN tp-only and DP layouts are both candidates, each names its
    parallelism (ep = dp × tp), GPUs = replicas × tp × dp, and a DP candidate's step is predict's at that layout."""
    res = plan("deepseek-v3", hardware=["h200-sxm"], **REQ)
    ok = [c for c in res.candidates if c.feasible]
    dp_cands = [c for c in ok if c.dp > 1]
    assert dp_cands and any(c.dp == 1 for c in ok)
    for c in dp_cands:
        assert c.ep == c.dp * c.tp and c.parallelism == f"tp {c.tp} · dp {c.dp} · ep {c.ep}"
        assert c.gpus == c.replicas * c.tp * c.dp
    c = dp_cands[0]
    r = roofline.predict("deepseek-v3", "h200-sxm", c.batch, 2048, 512, tp=c.tp, dp=c.dp, ep=c.ep)
    assert c.t_decode_s == pytest.approx(r.tpot_s, rel=1e-6)
    tp_only = plan("deepseek-v3", hardware=["h200-sxm"], dp_options=[1], **REQ)
    assert all(c.dp == 1 for c in tp_only.candidates)
