"""Assemble the op list of one forward pass (prefill or one decode step) on one GPU.

Prefill and decode share this code: a decode step is the same layer stack with T = 1
new token per sequence and ``past`` cached tokens. Layers are grouped by kind
(global/local attention × dense/MoE FFN) and each op's ``count`` is the number of
layers of that kind, so the list stays short while the totals are exact.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from roofline.ops import attention, comm, ffn, traffic
from roofline.ops.context import BuildContext
from roofline.ops.records import Op, Phase, elementwise, gemm
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario


def layer_groups(model: ModelSpec) -> Counter[tuple[str, str]]:
    """How many layers have each (attention kind, ffn kind): e.g. {('local', 'moe'): 18, ...}."""
    first_dense = model.moe.first_dense_layers if model.moe else model.num_layers
    return Counter((kind, "dense" if i < first_dense else "moe") for i, kind in enumerate(model.layer_kinds()))


def _layer_ops(c: BuildContext, attn_kind: str, ffn_kind: str, count: int) -> list[Op]:
    model, h, M, ab, dt = c.model, c.model.hidden_size, c.tokens, c.a_bytes, c.gemm_dtype
    lk = f"{attn_kind}_{ffn_kind}"
    sw = model.attention.sliding_window
    window = float(sw) if attn_kind == "local" and sw is not None else float("inf")
    ops = traffic.residual_add_norm_ops(c, lk, count)
    build = attention.mla_ops if model.attention.mla is not None else attention.gqa_ops
    ops += build(c, lk, count, window)
    ops.append(traffic.rope_op(c, lk, count))
    if model.attention.mla is not None and c.phase == "prefill":
        ops.append(traffic.mla_prefill_kv_op(c, lk, count))
    if ffn_kind == "dense":
        ops += ffn.dense_ffn_ops(c, lk, count, model.ffn.intermediate_size, model.ffn.kind)
    else:
        ops += ffn.moe_ops(c, lk, count)
        if c.sc.ep > 1:
            msg = M * model.moe.top_k * h * ab if model.moe else M
            ops.append(comm.all_to_all("comm.ep_all_to_all", "comm", lk, 2 * count, dt, msg, c.sc.ep))
    if c.tp > 1:
        ops.append(comm.all_reduce("comm.tp_all_reduce", "comm", lk, 2 * count, dt, M * h * ab, c.tp, c.hw))
    return ops


def build_ops(
    model: ModelSpec,
    sc: Scenario,
    hw: HardwareSpec,
    phase: Phase,
    batch: object,
    new_tokens: object,
    past: object,
) -> list[Op]:
    """Every op of one forward pass over all layers, sharded for one GPU of a tp group.

    With pipeline parallelism the stages run one after another for a single batch, so
    the pass traverses all layers plus (pp − 1) activation hand-offs. The lm_head runs
    on the last position of each sequence only: m = B. A decode step of a scenario with
    ``cuda_graphs`` replays as one CUDA graph: every op gets ``launch="graph"``.
    """
    c = BuildContext.create(model, sc, hw, phase, batch, new_tokens, past)
    h, v, M, B, ab, dt = model.hidden_size, model.vocab_size, c.tokens, c.batch, c.a_bytes, c.gemm_dtype
    ops = [
        elementwise("embedding", "embedding", "model", 1, dt, M * h, 1.0, ab, 0.0, np.minimum(M, v) * h * c.emb_bytes),
    ]
    if sc.tp > 1:
        ops.append(traffic.embedding_all_reduce(c))
    for (attn_kind, ffn_kind), count in sorted(layer_groups(model).items()):
        ops += _layer_ops(c, attn_kind, ffn_kind, count)
    ops.append(elementwise("final_norm", "norm", "model", 1, dt, B * h, 2.0, ab, 4.0, h * ab))
    ops.append(gemm("lm_head", "lm_head", "model", 1, dt, B, v / sc.tp, h, c.emb_bytes, ab))
    if sc.tp > 1:
        ops.append(comm.all_gather("comm.logits_all_gather", "comm", "model", 1, dt, B * v * ab, sc.tp))
    if sc.pp > 1:
        ops.append(comm.send_recv("comm.pp_send_recv", "comm", sc.pp - 1, dt, M * h * ab, sc.tp * sc.pp))
    if sc.use_checkpoint or sc.weight_overrides:
        ops = [_module_format(c, op) for op in ops]
    if phase == "decode" and sc.cuda_graphs:
        ops = [replace(op, launch="graph") for op in ops]
    return ops


def module_group(op: Op) -> str | None:
    """Checkpoint module group of a weight GEMM (None: not a quantised linear layer)."""
    if op.kind != "gemm" or op.name == "moe.router" or op.name == "lm_head":
        return None
    if op.name.startswith("moe.experts"):
        return "routed_experts"
    if op.name.startswith("moe.shared"):
        return "shared_experts"
    return {"attention": "attention", "ffn": "dense_ffn"}.get(op.group)


def _module_format(c: BuildContext, op: Op) -> Op:
    """Weight bytes and compute peak of ``op`` in its module group's format (per-module checkpoints).

    The builders price weights at ``weight_dtype``; a group in format f reads
    weight_bytes × bytes(f) / bytes(weight_dtype) and computes at :meth:`Scenario.group_compute_dtype`.
    """
    group = module_group(op)
    if group is None:
        return op
    fmt = c.formats.get(group)
    scale = fmt.bytes_per_element / c.w_bytes
    return replace(op, weight_bytes=op.weight_bytes * scale, dtype=c.sc.group_compute_dtype(c.hw, fmt))


def prefill_ops(model: ModelSpec, sc: Scenario, hw: HardwareSpec) -> list[Op]:
    """Prefill of B sequences × prompt_len tokens from an empty cache."""
    return build_ops(model, sc, hw, "prefill", sc.batch, sc.prompt_len, np.zeros_like(np.asarray(sc.prompt_len)))


def decode_ops(model: ModelSpec, sc: Scenario, hw: HardwareSpec, context: object) -> list[Op]:
    """One decode step of B sequences, each attending ``context`` tokens (incl. the new one)."""
    ctx = np.asarray(context, dtype=np.float64)
    return build_ops(model, sc, hw, "decode", sc.batch, np.ones_like(ctx), ctx - 1.0)
