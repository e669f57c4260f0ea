"""PredictionResult: the typed, complete answer of ``predict`` that every renderer shows."""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from roofline.engine.config import latency_basis
from roofline.memory import MemoryBudget
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

    from roofline.published.uncertainty import Interval
    from roofline.speculation.decode import SpeculativeDecode


@dataclass(frozen=True)
class PredictionResult:
    """Predicted latency, throughput and memory of one scenario, with its breakdown.

    Latencies are NaN when the scenario does not fit (``fits`` is False and
    ``missing_bytes`` says by how much): out-of-memory is a result, not a latency.
    """

    model: ModelSpec
    hardware: HardwareSpec
    scenario: Scenario
    profile: CalibrationProfile
    fits: bool
    missing_bytes: float
    ttft_s: float
    tpot_s: float
    tpot_first_s: float
    tpot_last_s: float
    e2e_s: float
    decode_s: float
    throughput_tok_s: float
    throughput_tok_s_per_gpu: float
    total_throughput_tok_s: float
    kv_bytes_per_token: float
    kv_bytes_per_sequence: float
    kv_cache_bytes: float
    weight_bytes_per_gpu: float
    activation_peak_bytes: float
    memory: MemoryBudget
    max_batch: int
    prefill_flops: float
    prefill_bytes: float
    decode_flops_per_step: float
    decode_bytes_per_step: float
    mfu_prefill: float
    mbu_prefill: float
    mfu_decode: float
    mbu_decode: float
    bound_prefill: str
    bound_decode: str
    ops_fn: Callable[[], pd.DataFrame] = field(repr=False, compare=False)
    steps_fn: Callable[[], np.ndarray] = field(repr=False, compare=False)
    speculative: SpeculativeDecode | None = field(default=None, repr=False, compare=False)

    @functools.cached_property
    def ops(self) -> pd.DataFrame:
        """Per-op breakdown (built on first access): prefill rows sum to TTFT, decode rows to mean TPOT."""
        return self.ops_fn()

    @functools.cached_property
    def tpot_steps_s(self) -> np.ndarray:
        """Time of every decode step j = 1 … O−1 (context P + j); NaN when the scenario does not fit."""
        return self.steps_fn()

    @property
    def num_gpus(self) -> int:
        """GPUs used by all replicas."""
        return self.scenario.num_gpus

    def _moe_layout(self) -> dict[str, Any]:
        """dp, redundant_experts and moe_overlap, present in :meth:`summary` only when one is not the default."""
        sc = self.scenario
        if sc.dp == 1 and sc.redundant_experts == 0 and sc.moe_overlap == "none":
            return {}
        return {"dp": sc.dp, "redundant_experts": sc.redundant_experts, "moe_overlap": sc.moe_overlap}

    def summary(self) -> dict[str, Any]:
        """Flat dict of every scalar field with units in the names (JSON/CSV friendly)."""
        sc = self.scenario
        m = self.memory
        return {
            "model": self.model.name,
            "hardware": self.hardware.name,
            "profile": self.profile.name,
            "engine": m.engine.label,
            "engine_memory_fraction": m.engine.memory_fraction,
            "engine_memory_fraction_of": m.engine.memory_fraction_of,
            "batch": int(np.asarray(sc.batch)),
            "prompt_len": int(np.asarray(sc.prompt_len)),
            "output_len": int(np.asarray(sc.output_len)),
            "weight_dtype": sc.weight_label(self.model),
            "act_dtype": sc.activation.value,
            "kv_dtype": sc.kv_dtype.value,
            "tp": sc.tp,
            "pp": sc.pp,
            "ep": sc.ep,
            **self._moe_layout(),
            "num_gpus": self.num_gpus,
            "fits": self.fits,
            "missing_bytes": self.missing_bytes,
            "ttft_s": self.ttft_s,
            "tpot_s": self.tpot_s,
            "tpot_first_s": self.tpot_first_s,
            "tpot_last_s": self.tpot_last_s,
            "e2e_s": self.e2e_s,
            "throughput_tok_s": self.throughput_tok_s,
            "throughput_tok_s_per_gpu": self.throughput_tok_s_per_gpu,
            "total_throughput_tok_s": self.total_throughput_tok_s,
            "kv_bytes_per_token": self.kv_bytes_per_token,
            "kv_bytes_per_sequence": self.kv_bytes_per_sequence,
            "kv_cache_bytes": self.kv_cache_bytes,
            "weight_bytes_per_gpu": self.weight_bytes_per_gpu,
            "activation_peak_bytes": self.activation_peak_bytes,
            "memory_capacity_bytes": m.capacity_bytes,
            "memory_usable_bytes": m.usable_bytes,
            "reserve_bytes": float(m.reserve_bytes),
            "kv_budget_bytes": float(m.kv_budget_bytes),
            "kv_bytes_per_gpu": float(m.kv_bytes),
            "free_bytes": float(m.free_bytes),
            "max_batch": self.max_batch,
            "prefill_flops": self.prefill_flops,
            "prefill_bytes": self.prefill_bytes,
            "decode_flops_per_step": self.decode_flops_per_step,
            "decode_bytes_per_step": self.decode_bytes_per_step,
            "mfu_prefill": self.mfu_prefill,
            "mbu_prefill": self.mbu_prefill,
            "mfu_decode": self.mfu_decode,
            "mbu_decode": self.mbu_decode,
            "bound_prefill": self.bound_prefill,
            "bound_decode": self.bound_decode,
            "link_notes": "; ".join(self.link_notes),
            "evidence": "; ".join(self.evidence),
            "latency_basis": latency_basis(m.engine),
            **(self.speculative.summary() if self.speculative is not None else {}),
        }

    @property
    def evidence(self) -> tuple[str, ...]:
        """Which measured evidence this prediction's op times rest on, on this hardware
        (:func:`roofline.provenance.scenario_evidence`)."""
        from roofline.provenance import scenario_evidence

        return scenario_evidence(self.profile, self.hardware, self.model, self.scenario)

    @property
    def link_notes(self) -> list[str]:
        """Collective groups of this scenario whose path leaves the fast fabric (priced on that path)."""
        from roofline.specs.topology import parallel_groups, slow_link_notes

        sc = self.scenario
        return [note for _, note in slow_link_notes(self.hardware, parallel_groups(sc.tp, sc.pp, sc.ep))]

    def interval(self, name: str, level: float = 0.8) -> tuple[float, float]:
        """(low, high) of headline figure ``name`` (ttft_s, tpot_s, e2e_s, throughput_tok_s, …) at ``level``.

        From the model's leave-one-source-out error on public rows, by regime, combined with a
        measured profile's ceiling spread (see :mod:`roofline.published.uncertainty`); NaN when
        the scenario does not fit.
        """
        iv = self.interval_detail(name, level)
        return (iv.low, iv.high)

    def interval_detail(self, name: str, level: float = 0.8) -> Interval:
        """The full interval record of ``name``: bounds, regime pooled from, rows and sources behind it."""
        from roofline.published.uncertainty import result_interval

        return result_interval(self, name, level)

    def layer_breakdown(self) -> pd.DataFrame:
        """Time per (phase, group) summed over ops; sums to TTFT and mean TPOT."""
        return self.ops.groupby(["phase", "group"], sort=False)["time_s"].sum().reset_index()

    def plot_roofline(self) -> Figure:
        """Matplotlib Figure placing prefill and decode ops on this hardware's roofline."""
        from roofline.report.charts import roofline_figure

        return roofline_figure([self])

    def _repr_html_(self) -> str:
        from roofline.report.notebook import prediction_html

        return prediction_html(self)
