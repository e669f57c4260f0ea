"""Named workload presets: prompt/output lengths, request rate and latency SLOs, with rationale.

A preset is a starting point that the report states verbatim; any field can be overridden
(the report then says which). ``custom`` has no defaults: every field must be given.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from roofline.boundary.limits import MAX_SEQUENCE_TOKENS
from roofline.errors import ScenarioError, suggest


@dataclass(frozen=True)
class WorkloadPreset:
    """A serving workload: request shape, arrival rate and latency targets (SI units)."""

    name: str
    prompt_len: int
    output_len: int
    qps: float
    ttft_slo_s: float
    tpot_slo_s: float
    rationale: str
    overridden: tuple[str, ...] = ()
    ttft_pct: float = 99.0
    tpot_pct: float = 90.0

    @property
    def slo_text(self) -> str:
        """The SLOs as percentiles over requests, e.g. 'TTFT P99 ≤ 500 ms, TPOT P90 ≤ 50 ms'."""
        from roofline.units import fmt_seconds

        return (
            f"TTFT P{self.ttft_pct:g} ≤ {fmt_seconds(self.ttft_slo_s)}, "
            f"TPOT P{self.tpot_pct:g} ≤ {fmt_seconds(self.tpot_slo_s)}"
        )

    @property
    def contents(self) -> str:
        """One line listing what the preset sets (for ``report --help`` and the report)."""
        return (
            f"{self.name}: prompt {self.prompt_len:,} tokens, output {self.output_len:,} tokens, "
            f"{self.qps:g} requests/s, {self.slo_text}"
        )

    @property
    def per_user_tok_s(self) -> float:
        """Token rate one user sees at the TPOT SLO (1 / TPOT)."""
        return 1.0 / self.tpot_slo_s


PRESETS: dict[str, WorkloadPreset] = {
    "chat": WorkloadPreset(
        "chat",
        1024,
        256,
        10.0,
        0.5,
        0.050,
        "An interactive assistant turn: system prompt plus a few turns of history (~1k tokens) and a reply of a "
        "few paragraphs. A first token within 0.5 s feels instant; 50 ms per token (20 tokens/s) streams faster "
        "than people read (~5-8 tokens/s). 10 requests/s is a modest production service. Percentiles (assumed): "
        "TTFT at P99 because the slowest first tokens are what users of a chat notice; TPOT at P90 over requests.",
        ttft_pct=99.0,
        tpot_pct=90.0,
    ),
    "rag": WorkloadPreset(
        "rag",
        8192,
        256,
        5.0,
        2.0,
        0.060,
        "Retrieval-augmented answers: ~8k tokens of retrieved passages plus the question, a short grounded answer. "
        "Users already wait for retrieval, so a 2 s first token is acceptable; 60 ms per token still streams "
        "faster than reading. Long prompts make prefill (TTFT) the binding constraint. Percentiles (assumed): TTFT "
        "at P95 (retrieval latency already varies) and TPOT at P90 over requests.",
        ttft_pct=95.0,
        tpot_pct=90.0,
    ),
    "summarize": WorkloadPreset(
        "summarize",
        4096,
        512,
        2.0,
        3.0,
        0.080,
        "Document summarisation: a ~4k-token document in, a ~500-token summary out. The user waits for the "
        "whole summary, so latency targets are looser (3 s first token, 80 ms per token: about 44 s end to end) "
        "and cost per token matters more. Percentiles (assumed): TTFT and TPOT at P90 over requests (a batch-like "
        "job where a slow tail costs little).",
        ttft_pct=90.0,
        tpot_pct=90.0,
    ),
}

FIELDS = ("prompt_len", "output_len", "qps", "ttft_slo_s", "tpot_slo_s")


def resolve_workload(
    name: str,
    *,
    prompt_len: int | None = None,
    output_len: int | None = None,
    qps: float | None = None,
    ttft_slo_s: float | None = None,
    tpot_slo_s: float | None = None,
) -> WorkloadPreset:
    """The preset ``name`` with any given field overridden; ``custom`` needs every field."""
    given = {
        "prompt_len": prompt_len,
        "output_len": output_len,
        "qps": qps,
        "ttft_slo_s": ttft_slo_s,
        "tpot_slo_s": tpot_slo_s,
    }
    overrides: dict[str, Any] = {k: v for k, v in given.items() if v is not None}
    key = name.strip().lower()
    if key == "custom":
        missing = [k for k in FIELDS if k not in overrides]
        if missing:
            flags = ", ".join(_FLAG[k] for k in missing)
            raise ScenarioError(f"workload 'custom' needs every field; missing {flags}")
        wl = WorkloadPreset("custom", 1, 1, 1.0, 1.0, 1.0, "WorkloadPreset given explicitly by the user.")
        wl = replace(wl, **overrides)
    elif key in PRESETS:
        wl = replace(PRESETS[key], **overrides, overridden=tuple(k for k in FIELDS if k in overrides))
    else:
        names = [*PRESETS, "custom"]
        raise ScenarioError(f"unknown workload '{name}'{suggest(key, names)} Known workloads: {', '.join(names)}.")
    _check(wl)
    return wl


_FLAG = {
    "prompt_len": "--prompt", "output_len": "--output", "qps": "--qps",
    "ttft_slo_s": "--ttft-slo", "tpot_slo_s": "--tpot-slo",
}  # fmt: skip


def _check(wl: WorkloadPreset) -> None:
    """Token counts: whole numbers in [1, MAX_SEQUENCE_TOKENS]; rates and SLOs: finite numbers > 0."""
    for k in ("prompt_len", "output_len"):
        v = getattr(wl, k)
        if isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= MAX_SEQUENCE_TOKENS:
            raise ScenarioError(
                f"{_FLAG[k]} must be a whole number of tokens in [1, {MAX_SEQUENCE_TOKENS:,}] (got {v!r})"
            )
    for k in ("qps", "ttft_slo_s", "tpot_slo_s"):
        v = getattr(wl, k)
        if isinstance(v, bool) or not isinstance(v, int | float) or not (math.isfinite(v) and v > 0):
            raise ScenarioError(f"{_FLAG[k]} must be > 0 and finite (got {v!r})")
