"""The serving validation's engine options and protocol follow the cited generator rules (hand-derived)."""

from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "validation" / "serving"))
import validate_simulator as vs


def _row(backend: str, c: int, isl: int, hw: str = "h200-sxm") -> pd.Series:
    return pd.Series({"backend": backend, "batch_size": float(c), "isl": isl, "hardware": hw})


def test_vllm_and_trtllm_budget_is_batch_plus_prompt_plus_1500() -> None:
    """vllm.rule: max_batch_size 512 below concurrency 512 (else 2C); max_num_tokens = m + ISL + 1500.
    trtllm.rule: the same, rounded up to 32-token blocks, chunked prefill at its default (off)."""
    assert vs.deployment_options(_row("vllm", 64, 1024)) == {"max_num_seqs": 512, "max_num_batched_tokens": 3036}
    assert vs.deployment_options(_row("vllm", 512, 8192)) == {"max_num_seqs": 1024, "max_num_batched_tokens": 10716}
    t = vs.deployment_options(_row("trtllm", 8, 1000))
    assert t == {  # 3012 -> 3040; graphs padded up to max_batch_size + 8 (trtllm.rule cuda_graph_batch_sizes)
        "max_num_seqs": 512,
        "max_num_batched_tokens": 3040,
        "chunked_prefill": False,
        "cuda_graph_max_batch": 520,
        "cuda_graph_padding": True,
    }


@pytest.mark.parametrize(
    ("hw", "isl", "budget"),
    [("h200-sxm", 1024, 2524), ("h200-sxm", 16384, 8192), ("b200", 16384, 16384), ("h100-sxm", 8192, 8192)],
)
def test_sglang_mixed_chunks_and_prefill_cap(hw: str, isl: int, budget: int) -> None:
    """sglang.rule: enable_mixed_chunk and max_prefill_tokens = ISL + 1500, chunks capped by the preset's
    chunked_prefill_size (SGLang 0.5: 8,192 below 160 GiB of GPU memory, 16,384 from it); CUDA graphs for every
    batch size up to the max batch (cuda_graph_batch_sizes = range(1, max_batch_size + 1))."""
    opts = vs.deployment_options(_row("sglang", 16, isl, hw))
    assert opts == {"mixed_chunk": True, "max_num_batched_tokens": budget, "cuda_graph_max_batch": 512}


def test_vllm_async_from_v0_14() -> None:
    assert not vs.vllm_async("0.12.0") and not vs.vllm_async("0.11.2")
    assert vs.vllm_async("0.14.0") and vs.vllm_async("0.19.0") and vs.vllm_async("nightly-5b8c30d62b754b57")


def test_aiperf_protocol_counts_every_measured_request_from_a_cold_start() -> None:
    """bench_run.sh.j2: --num-requests 50C after 2C warm-up requests that aiperf drains first, so the
    simulation runs the 50C measured requests from an idle engine and counts them all."""
    assert vs.request_count(4, "aiperf") == 200 and vs.request_count(128, "aiperf") == 6400
    assert vs.request_count(1024, "aiperf") == vs.MAX_REQUESTS
    assert vs.request_count(4, "short") == 50 and vs.request_count(64, "short") == 320


def test_disaggregated_pool_options_follow_the_benchmark_rules() -> None:
    """rule_plugin/benchmark/*.rule: prefill max_batch_size = the row's (default 1) and ISL + 1500 tokens
    (TensorRT-LLM: 32-token blocks, no overlap scheduler, no chunking); decode max_batch_size = the row's
    decode batch and, for vLLM / TensorRT-LLM, a token budget of that batch."""
    import validate_disagg as vd

    def row(backend: str, pb: float) -> pd.Series:
        return pd.Series(
            {
                "backend": backend,
                "isl": 8192,
                "decode_batch_size": 48.0,
                "prefill_batch_size": pb,
                "hardware": "h200-sxm",
            }
        )

    pre, dec = vd.pool_options(row("trtllm", 1.0))
    assert pre == {"max_num_seqs": 1, "max_num_batched_tokens": 9696, "chunked_prefill": False,
                   "async_scheduling": False}  # fmt: skip  # 9692 -> 9696
    assert dec == {"max_num_seqs": 48, "max_num_batched_tokens": 64}
    pre, dec = vd.pool_options(row("vllm", float("nan")))
    assert pre == {"max_num_seqs": 1, "max_num_batched_tokens": 9692}
    assert dec == {"max_num_seqs": 48, "max_num_batched_tokens": 48}
    pre, dec = vd.pool_options(row("sglang", 2.0))
    # SGLang: ISL + 1500 capped by its chunk, 8,192 on a 141 GB GPU (0.5: below 160 GiB)
    assert pre == {"max_num_seqs": 2, "max_num_batched_tokens": 8192} and dec == {"max_num_seqs": 48}
