"""Copy the rows of the AIConfigurator silicon sample that the simulator can model into validation/serving/.

Source: /work/shared/validation/serving/aic_silicon_sample.csv = ai-dynamo/aiconfigurator @ 095f58a5,
aic-core/src/aiconfigurator_core/systems/silicon_sample.csv (Apache-2.0); see SOURCES.md here.
Kept: aggregated serving (mode agg), no attention data parallelism, pp 1, tp <= 8 on one node, experts
either tp-sharded (moe_ep 1) or fully expert-parallel (moe_ep = tp), models whose architecture is in the
library (DeepSeek-R1/V3/V3.1 -> deepseek-v3, gpt-oss-120b), GPUs in the library (H100, H200, B200).
"""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd

SRC = Path(sys.argv[1] if len(sys.argv) > 1 else "/work/shared/validation/serving/aic_silicon_sample.csv")
OUT = Path(__file__).with_name("aic_silicon_agg.csv")
FAMILY = {"deepseek-ai/DeepSeek-R1": "deepseek", "deepseek-ai/DeepSeek-V3": "deepseek",
          "nvidia/DeepSeek-R1-NVFP4": "deepseek", "nvidia/DeepSeek-V3.1-NVFP4": "deepseek",
          "openai/gpt-oss-120b": "gpt-oss"}  # fmt: skip
SPEC = {"deepseek": "deepseek-v3", "gpt-oss": "gpt-oss-120b"}
HW = {"h100_sxm": "h100-sxm", "h200_sxm": "h200-sxm", "b200_sxm": "b200"}


def main() -> None:
    d = pd.read_csv(SRC)
    keep = (
        (d["mode"] == "agg") & (d.attention_dp_size == 1) & (d.pp_size == 1) & (d.tp_size <= 8)
        & d.model_path.isin(list(FAMILY)) & d.system.isin(list(HW))
        & ((d.moe_ep_size == 1) | (d.moe_ep_size == d.tp_size))
    )  # fmt: skip
    cols = ["id", "backend", "backend_version", "model_path", "system", "precision", "isl", "osl", "batch_size",
            "tp_size", "moe_ep_size", "silicon_ttft_ms", "silicon_tpot_ms"]  # fmt: skip
    out = d.loc[keep, cols].copy()
    out["family"] = out.model_path.map(FAMILY)
    out["spec"] = out.family.map(SPEC)
    out["hardware"] = out.system.map(HW)
    out.to_csv(OUT, index=False)
    print(f"{len(out)} rows -> {OUT}")
    print(out.groupby(["backend", "family", "hardware"]).size().to_string())


if __name__ == "__main__":
    main()
