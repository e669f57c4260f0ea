"""Shared inputs of the op builders for one phase: shapes, formats, sharding."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from roofline.ops.expert_parallel import dp_rank_batch
from roofline.ops.records import Phase, arr
from roofline.specs.hardware import ComputeDtype, HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.quant import ModuleFormats
from roofline.specs.scenario import Scenario


@dataclass(frozen=True)
class BuildContext:
    """One phase of one scenario: B sequences × T new tokens after ``past`` cached tokens.

    Prefill: T = prompt_len, past = 0. Decode step: T = 1, past = context − 1. With attention data
    parallelism (``sc.dp`` > 1) ``batch`` is the busiest DP rank's ⌈B/dp⌉ sequences (the ranks wait for it,
    :func:`roofline.ops.expert_parallel.dp_sync_time_s`) and ``global_batch`` the B sequences of all ranks
    whose tokens the experts receive.
    """

    model: ModelSpec
    sc: Scenario
    phase: Phase
    batch: np.ndarray
    new_tokens: np.ndarray
    past: np.ndarray
    gemm_dtype: ComputeDtype
    attn_dtype: ComputeDtype
    hw: HardwareSpec
    formats: ModuleFormats
    global_batch: np.ndarray | None = None

    @classmethod
    def create(
        cls,
        model: ModelSpec,
        sc: Scenario,
        hw: HardwareSpec,
        phase: Phase,
        batch: object,
        new_tokens: object,
        past: object,
    ) -> BuildContext:
        """Resolve formats against ``hw`` and broadcast the shape arrays."""
        b, t, p = np.broadcast_arrays(arr(batch), arr(new_tokens), arr(past))
        whole = None
        if sc.dp > 1:
            whole, b = b, dp_rank_batch(b, sc.dp)
        return cls(
            model,
            sc,
            phase,
            b,
            t,
            p,
            sc.gemm_compute_dtype(hw),
            sc.attention_compute_dtype(hw),
            hw,
            sc.weight_formats(model),
            whole,
        )

    @property
    def tokens(self) -> np.ndarray:
        """M = B·T tokens in this forward pass."""
        return self.batch * self.new_tokens

    @property
    def moe_tokens(self) -> np.ndarray:
        """Tokens of all DP ranks in this pass (B·T), the routed experts' input; = :attr:`tokens` without DP."""
        return self.tokens if self.global_batch is None else self.global_batch * self.new_tokens

    @property
    def context(self) -> np.ndarray:
        """Attended length of the last new token: past + T."""
        return self.past + self.new_tokens

    @property
    def w_bytes(self) -> float:
        """Bytes per weight element of the layer GEMMs."""
        return self.sc.weight_dtype.bytes_per_element

    @property
    def a_bytes(self) -> float:
        """Bytes per activation element in HBM (see :attr:`Scenario.activation_memory_bytes_per_element`)."""
        return self.sc.activation_memory_bytes_per_element

    @property
    def kv_bytes(self) -> float:
        """Bytes per KV-cache element."""
        return self.sc.kv_dtype.bytes_per_element

    @property
    def emb_bytes(self) -> float:
        """Bytes per embedding / lm_head element: the embeddings group's format (activation format unless
        quantize_embeddings, or the shipped checkpoint's)."""
        return self.formats.embeddings.bytes_per_element

    @property
    def tp(self) -> int:
        """Tensor-parallel degree."""
        return self.sc.tp
