"""Copy the rows of the AIConfigurator silicon sample that the simulator can model into validation/serving/.

Source: /work/shared/validation/serving/aic_silicon_sample.csv = ai-dynamo/aiconfigurator @ 095f58a5,
aic-core/src/aiconfigurator_core/systems/silicon_sample.csv (Apache-2.0); see SOURCES.md here.
Kept: aggregated serving (mode agg), no attention data parallelism, pp 1, tp <= 8 on one node, experts
either tp-sharded (moe_ep 1) or fully expert-parallel (moe_ep = tp) with moe_tp × moe_ep = tp, the precision
stated, models whose architecture is in the
library (DeepSeek-R1/V3/V3.1 -> deepseek-v3, gpt-oss-120b, Qwen3-32B, Qwen3-235B-A22B, Qwen3.5-397B-A17B, GLM-5,
Kimi-K2.5, MiniMax-M2.5; one family each), GPUs in the library (H100, H200, B200; not B300).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

SRC = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/validation/serving/aic_silicon_sample.csv")
OUT = Path(__file__).with_name("aic_silicon_agg.csv")
FAMILY = {"deepseek-ai/DeepSeek-R1": "deepseek", "deepseek-ai/DeepSeek-V3": "deepseek",
          "nvidia/DeepSeek-R1-NVFP4": "deepseek", "nvidia/DeepSeek-V3.1-NVFP4": "deepseek",
          "openai/gpt-oss-120b": "gpt-oss", "Qwen/Qwen3-32B": "qwen3-dense", "nvidia/Qwen3-32B-NVFP4": "qwen3-dense",
          "Qwen/Qwen3-235B-A22B-FP8": "qwen3-moe", "Qwen/Qwen3.5-397B-A17B": "qwen3.5", "zhipuai/GLM-5": "glm",
          "moonshotai/Kimi-K2.5": "kimi", "MiniMaxAI/MiniMax-M2.5": "minimax"}  # fmt: skip
SPEC = {
    "deepseek": "deepseek-v3", "gpt-oss": "gpt-oss-120b", "qwen3-dense": "qwen3-32b", "qwen3-moe": "qwen3-235b-a22b",
    "qwen3.5": "qwen3.5-397b-a17b", "glm": "glm-5", "kimi": "kimi-k2.5", "minimax": "minimax-m2.5",
}  # fmt: skip
HW = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200"}


def main() -> None:
    d = pd.read_csv(SRC)
    keep = (
        (d["mode"] == "agg")
        & (d.attention_dp_size.fillna(0) <= 1)
        & (d.pp_size.fillna(1) == 1)
        & (d.tp_size <= 8)
        & d.model_path.isin(list(FAMILY))
        & d.system.isin(list(HW))
        & ((d.moe_ep_size.fillna(0) <= 1) | (d.moe_ep_size == d.tp_size))
        & (d.moe_tp_size.isna() | (d.moe_tp_size * d.moe_ep_size.fillna(1).clip(lower=1) == d.tp_size))
        & d.precision.notna()
    )
    cols = [
        "id",
        "backend",
        "backend_version",
        "model_path",
        "system",
        "precision",
        "isl",
        "osl",
        "batch_size",
        "tp_size",
        "moe_ep_size",
        "silicon_ttft_ms",
        "silicon_tpot_ms",
    ]
    out = d.loc[keep, cols].copy()
    out["moe_ep_size"] = out.moe_ep_size.fillna(0).clip(lower=1)  # 0 / empty: dense model or experts tp-sharded
    out["family"] = out.model_path.map(FAMILY)
    out["spec"] = out.family.map(SPEC)
    out["hardware"] = out.system.map(HW)
    out.to_csv(OUT, index=False)
    print(f"{len(out)} rows -> {OUT}")
    print(out.groupby(["backend", "family", "hardware"]).size().to_string())


if __name__ == "__main__":
    main()
