"""The kernels an engine's MoE module launches inside one timed call of AIConfigurator's MoE collector.

Every collector times the engine's whole MoE module from given router logits, never the grouped GEMMs alone
(aiconfigurator 0.12, ``collector/<engine>/collect_moe.py``): vLLM ``moe_module(hidden_states, router_logits)``
(``FusedMoE``: top-k selection, block alignment, both grouped GEMMs, the activation, the top-k sum), SGLang
``select_experts`` + ``fused_moe`` (top-k, alignment, GEMMs, activation, sum-reduce), TensorRT-LLM
``moe.forward(hidden_states, logits)`` (routing, expert-map sort, permutation, GEMMs, finalize). The router's own
GEMM is outside (the logits are an input). So a row's seconds hold, beyond the grouped GEMMs, every kernel the
engine's inventory hangs on the MoE ops, and roofline's step pays those same kernels again through the inventory
(:attr:`roofline.ops.records.Op.engine_kernels`): a fit that nets only the two GEMMs' launches leaves the routing
and permutation kernels inside the fitted rates and the measured layer times, and a step pays them twice (vLLM
Mixtral: 7 kernels, 21 µs per layer, 0.7 ms of a 10 ms tp-4 decode step).

The counts the fit's ops carry, at the decode phase (the collector replays CUDA graphs), from the engine's shipped
inventory (:func:`roofline.engine.inventory.shipped_inventory`: the counts predict pays):

    gate_up kernels = kernels(moe.experts_gate_up) + Σ extras on moe.router   (top-k, softmax, renormalisation;
                                                                               at the router's 16-bit format)
    act kernels     = kernels(moe.experts_act)
    down kernels    = kernels(moe.experts_down)                                (top-k sum / finalize)

with a generic model class, so architecture-bound extras are the softmax top-k router's: DeepSeek's grouped top-k
glue (vLLM: 5 kernels where the softmax router has 4) is not told apart, since a table's rows carry layer shapes,
not models. An engine with no shipped inventory: None (the ops keep one kernel each).
"""

from __future__ import annotations

import pandas as pd

from roofline.engine.inventory import Where, shipped_inventory

#: The router's weight format as the op builder gives it (:func:`roofline.ops.builder.weight_format`: the 16-bit
#: router), which the routing extras' format conditions read; the activation, an elementwise op, has none ("").
ROUTER_FORMAT = "bf16"


def module_kernels(engine: str, weight_format: str, gated: bool, hidden_size: int) -> tuple[int, int, int] | None:
    """(gate_up, act, down) kernel counts of ``engine``'s timed MoE module for weights of ``weight_format``
    (module docstring); None without an inventory for ``engine``."""
    inv = shipped_inventory(engine)
    if inv is None:
        return None

    def where(fmt: str) -> Where:
        return Where("decode", fmt, 1, "", hidden_size)

    up = "moe.experts_gate_up" if gated else "moe.experts_up"
    routing = inv.extra_kernels("moe.router", where(ROUTER_FORMAT))
    return (
        inv.kernels(up, where(weight_format), 1) + routing,
        inv.kernels("moe.experts_act", where(""), 1),
        inv.kernels("moe.experts_down", where(weight_format), 1),
    )


def table_engine(rows: pd.DataFrame) -> str:
    """The engine whose table ``rows`` come from (their ``framework``; "" for frames without one)."""
    return str(rows["framework"].iloc[0]) if "framework" in rows and len(rows) else ""
