"""Assemble the op list of one forward pass (prefill or one decode step) on one GPU.

Prefill and decode share this code: a decode step is the same layer stack with T = 1
new token per sequence and ``past`` cached tokens. Layers are grouped by their resolved
structure (mixer kind × FFN kind × per-layer shape, ``ModelSpec.resolved_layers``) and each
op's ``count`` is the number of such layers, so the list stays short while the totals are
exact. Layers with only a mixer or only an FFN (Nemotron-H blocks, DeciLM no-ops) have half
the norms and one tensor-parallel all-reduce instead of two.
"""

from __future__ import annotations

import weakref
from collections import Counter

import numpy as np

from roofline.engine.inventory import KernelInventory, kernel_inventory
from roofline.engine.presets import DEFAULT_ENGINE, engine_preset
from roofline.ops import attention, comm, compressed, ffn, mixers, traffic
from roofline.ops.context import BuildContext
from roofline.ops.records import Op, Phase, elementwise, gemm, with_fields
from roofline.specs.hardware import HardwareSpec
from roofline.specs.layers import ResolvedLayer
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario


def layer_groups(model: ModelSpec) -> Counter[tuple[str, str]]:
    """How many layers have each (mixer kind, ffn kind): e.g. {('local', 'moe'): 18, ...}."""
    return Counter((layer.mixer, layer.ffn) for layer in model.resolved_layers())


_GROUPS: dict[int, tuple[weakref.ref[ModelSpec], tuple[tuple[ResolvedLayer, int, str], ...]]] = {}


def labelled_groups(model: ModelSpec) -> tuple[tuple[ResolvedLayer, int, str], ...]:
    """Distinct resolved layers with their counts and a unique label (``mixer_ffn``, numbered
    ``mixer_ffn.2``… when layers of one kind differ in shape, as in DeciLM).

    Computed once per (frozen) model object and kept while the object lives: every prefill and
    decode op list of every predict on that model starts from it."""
    key = id(model)
    hit = _GROUPS.get(key)
    if hit is not None and hit[0]() is model:
        return hit[1]
    out = tuple(_labelled_groups(model))
    _GROUPS[key] = (weakref.ref(model, lambda _ref: _GROUPS.pop(key, None)), out)
    return out


def _labelled_groups(model: ModelSpec) -> list[tuple[ResolvedLayer, int, str]]:
    groups = sorted(Counter(model.resolved_layers()).items(), key=lambda kv: (kv[0].label, -kv[1]))
    seen: Counter[str] = Counter()
    out = []
    for layer, count in groups:
        seen[layer.label] += 1
        label = layer.label if seen[layer.label] == 1 else f"{layer.label}.{seen[layer.label]}"
        out.append((layer, count, label))
    return out


def _layer_ops(c: BuildContext, layer: ResolvedLayer, count: int, lk: str) -> list[Op]:
    model, h, M, ab, dt = c.model, c.model.hidden_size, c.tokens, c.a_bytes, c.gemm_dtype
    parts = (layer.mixer != "none") + (layer.ffn != "none")
    norms = model.norms_per_layer * parts // 2
    ops = traffic.residual_add_norm_ops(c, lk, count, norms)
    if layer.mixer == "linear":
        ops += mixers.linear_ops(c, lk, count)
    elif layer.mixer == "compressed":
        ops += compressed.compressed_ops(c, lk, count, layer)
    elif layer.has_attention:
        build = attention.mla_ops if model.attention.mla is not None else attention.gqa_ops
        if layer.has_indexer:
            ops += mixers.indexer_ops(c, lk, count)
        ops += build(c, lk, count, layer)
        if not (model.attention.mla is not None and model.attention.mla.nope):  # Kimi MLA: NoPE, no rotary
            ops.append(traffic.rope_op(c, lk, count, layer))
        if model.attention.mla is not None and c.phase == "prefill":
            ops.append(traffic.mla_prefill_kv_op(c, lk, count))
    if layer.ffn == "dense":
        ops += ffn.dense_ffn_ops(c, lk, count, layer.intermediate_size, model.ffn.kind)
    elif layer.ffn == "moe":
        ops += ffn.moe_ops(c, lk, count)
        # ep <= tp: every GPU of the TP group already holds all M tokens (tensor-parallel attention), runs
        # its own experts on the rows routed to them, and the partial outputs are summed by the MoE's
        # all-reduce below (vLLM/SGLang/TensorRT-LLM without attention data parallelism): no all-to-all.
        # ep > tp: experts live on GPUs outside the TP group, so the routed tokens travel there and back.
        # dp > 1: attention data parallelism, wide-EP dispatch and combine on DeepEP-style kernels (ffn.py).
        if c.sc.dp > 1:  # ep = dp × tp: the exchange; ep = 1: every rank's tokens gathered to tp-sharded experts
            ops += ffn.moe_exchange_ops(c, lk, count) if c.sc.ep > 1 else ffn.moe_gather_ops(c, lk, count)
        elif c.sc.ep > c.tp:
            width = (model.moe.latent_size or h) if model.moe else h  # tokens travel in the latent width
            msg = M * model.moe.top_k * width * ab if model.moe else M
            a2a = comm.all_to_all("comm.ep_all_to_all", "comm", lk, 2 * count, dt, msg, c.sc.ep)
            ops.append(with_fields(a2a, overlap="two_batch") if c.sc.moe_overlap == "two_batch" else a2a)
    # under DP the reduce-scatter before the dispatch and the all-gather after the combine make one all-reduce
    reduces = parts - 1 if c.sc.dp > 1 and layer.ffn == "moe" else parts
    if c.tp > 1 and (reduces or c.sc.dp == 1):
        ops.append(comm.all_reduce("comm.tp_all_reduce", "comm", lk, reduces * count, dt, M * h * ab, c.tp, c.hw))
    return ops


def build_ops(
    model: ModelSpec, sc: Scenario, hw: HardwareSpec, phase: Phase, batch: object, new_tokens: object, past: object
) -> list[Op]:
    """Every op of one forward pass over all layers, sharded for one GPU of a tp group.

    With pipeline parallelism the stages run one after another for a single batch, so
    the pass traverses all layers plus (pp − 1) activation hand-offs. The lm_head runs
    on the last position of each sequence only: m = B. A decode step of a scenario with
    ``cuda_graphs`` replays as one CUDA graph: every op gets ``launch="graph"``, and ``uncaptured`` = 1 where the
    batch is beyond the engine's captured sizes (those steps launch eagerly); a prefill pass of an engine that replays
    piecewise graphs for non-uniform steps (``EngineConfig.mixed_graphs``, vLLM V1) gets them on every op but
    attention, ``uncaptured`` = 1 beyond the captured token counts. Each op's ``engine_kernels`` is
    what the scenario's engine launches for it (:mod:`roofline.engine.inventory`; -1 without an inventory).
    """
    c = BuildContext.create(model, sc, hw, phase, batch, new_tokens, past)
    h, v, M, B, ab, dt = model.hidden_size, model.vocab_size, c.tokens, c.batch, c.a_bytes, c.gemm_dtype
    ops = [
        elementwise("embedding", "embedding", "model", 1, dt, M * h, 1.0, ab, 0.0, np.minimum(M, v) * h * c.emb_bytes)
    ]
    if sc.tp > 1:
        ops.append(traffic.embedding_all_reduce(c))
    for layer, count, label in labelled_groups(model):
        ops += _layer_ops(c, layer, count, label)
    if model.attn_res_block_size is not None:
        ops.append(traffic.attention_residual_op(c))
    if model.compressed_attention is not None:
        ops += compressed.hyper_connection_ops(c)
    ops.append(elementwise("final_norm", "norm", "model", 1, dt, B * h, 2.0, ab, 4.0, h * ab))
    ops.append(gemm("lm_head", "lm_head", "model", 1, dt, B, v / sc.tp, h, c.emb_bytes, ab))
    if sc.tp > 1:
        ops.append(comm.all_gather("comm.logits_all_gather", "comm", "model", 1, dt, B * v * ab, sc.tp))
    if sc.pp > 1:
        ops.append(comm.send_recv("comm.pp_send_recv", "comm", sc.pp - 1, dt, M * h * ab, sc.tp * sc.pp))
    checkpoint = bool(sc.use_checkpoint or sc.weight_overrides)
    inventory = engine_inventory(sc, hw)
    graph: dict[str, object] = {}
    if phase == "decode" and sc.cuda_graphs:
        graph = {"launch": "graph", "uncaptured": _uncaptured(sc, c.batch)}
        return [_finished(c, inventory, op, checkpoint, graph) for op in ops]
    pieces = _piecewise(sc, c.tokens) if phase == "prefill" else {}
    return [_finished(c, inventory, op, checkpoint, pieces if op.kind != "attention" else {}) for op in ops]


def _finished(
    c: BuildContext, inventory: KernelInventory | None, op: Op, checkpoint: bool, graph: dict[str, object]
) -> Op:
    """``op`` with what the scenario sets after the builders, in one copy: its module group's format on a
    per-module checkpoint (:func:`_module_format`), its weight format and engine kernels (:func:`_engine_fields`),
    and ``graph``'s launch fields on a decode step replayed as a CUDA graph."""
    changes = {**(_module_format(c, op) if checkpoint else {}), **_engine_fields(c, inventory, op), **graph}
    return with_fields(op, **changes) if changes else op


def _uncaptured(sc: Scenario, batch: np.ndarray) -> float | np.ndarray:
    """1.0 where a decode step of ``batch`` sequences has no captured CUDA graph in the scenario's engine, else 0.0
    (:meth:`roofline.engine.config.EngineConfig.graph_replays`); the plain 0.0 when every grid point replays one."""
    eng = sc.engine
    if eng is None or eng.cuda_graph_max_batch is None:
        return 0.0
    replays = eng.graph_replays(batch)
    if bool(np.all(replays)):
        return 0.0
    return np.where(replays, 0.0, 1.0)


def _piecewise(sc: Scenario, tokens: np.ndarray) -> dict[str, object]:
    """The launch fields of a prefill pass's non-attention ops where the engine replays piecewise graphs for steps of
    ``tokens`` tokens (:meth:`roofline.engine.config.EngineConfig.piecewise_replays`; attention between the pieces
    stays eager): ``launch`` graph, ``uncaptured`` 1 where the step is beyond the capture; {} where no step is."""
    eng = sc.engine
    if eng is None or not (eng.cuda_graphs and eng.mixed_graphs):
        return {}
    replays = eng.piecewise_replays(tokens)
    if not bool(np.any(replays)):
        return {}
    return {"launch": "graph", "uncaptured": 0.0 if bool(np.all(replays)) else np.where(replays, 0.0, 1.0)}


def module_group(op: Op) -> str | None:
    """Checkpoint module group of a weight GEMM (None: not a quantised linear layer)."""
    if op.kind != "gemm" or op.name == "moe.router" or op.name == "lm_head":
        return None
    if op.name.startswith("moe.experts"):
        return "routed_experts"
    if op.name.startswith("moe.shared"):
        return "shared_experts"
    return {"attention": "attention", "ffn": "dense_ffn"}.get(op.group)


def _module_format(c: BuildContext, op: Op) -> dict[str, object]:
    """The fields that put ``op``'s weight bytes and compute peak in its module group's format (per-module
    checkpoints; none for an op that is not a quantised linear layer).

    The builders price weights at ``weight_dtype``; a group in format f reads
    weight_bytes × bytes(f) / bytes(weight_dtype) and computes at :meth:`Scenario.group_compute_dtype`.
    """
    group = module_group(op)
    if group is None:
        return {}
    fmt = c.formats.get(group)
    scale = fmt.bytes_per_element / c.w_bytes
    dtype = c.sc.group_compute_dtype(c.hw, fmt)
    return {"weight_bytes": op.weight_bytes * scale, "dtype": dtype, "weight_element_bytes": fmt.bytes_per_element}


_DEFAULT_VERSION: dict[str, str] = {}  # hardware name -> the default preset's version (resolved once per device)


def engine_inventory(sc: Scenario, hw: HardwareSpec) -> KernelInventory | None:
    """The kernel inventory of the scenario's engine (the default preset when none is set), or None: the
    ``ideal`` engine, or an engine version with no shipped inventory."""
    if sc.engine is not None:
        return kernel_inventory(sc.engine.name, sc.engine.version)
    version = _DEFAULT_VERSION.get(hw.name) or _DEFAULT_VERSION.setdefault(
        hw.name, engine_preset(DEFAULT_ENGINE, hw).version
    )
    return kernel_inventory(DEFAULT_ENGINE, version)


def weight_format(c: BuildContext, op: Op) -> str:
    """Storage format of a weight GEMM's weights (its module group's), "bf16" for the 16-bit router and
    lm_head, "" for ops that read no weights."""
    if op.kind != "gemm":
        return ""
    group = module_group(op)
    return c.formats.get(group).value if group is not None else "bf16"


def _engine_fields(c: BuildContext, inventory: KernelInventory | None, op: Op) -> dict[str, object]:
    """The fields of ``op``'s weight format (GEMMs) and of the kernels the engine launches for it."""
    fmt = weight_format(c, op)
    if inventory is None:
        return {"weight_format": fmt} if fmt else {}
    where = (c.phase, fmt, c.tp, c.model.architecture, c.model.hidden_size)  # the fields of a Where
    return {"weight_format": fmt, "engine_kernels": inventory.kernels_at(op.name, where, op.kernels)}


def prefill_ops(model: ModelSpec, sc: Scenario, hw: HardwareSpec) -> list[Op]:
    """Prefill of B sequences × prompt_len tokens from an empty cache."""
    return build_ops(model, sc, hw, "prefill", sc.batch, sc.prompt_len, np.zeros_like(np.asarray(sc.prompt_len)))


def decode_ops(model: ModelSpec, sc: Scenario, hw: HardwareSpec, context: object) -> list[Op]:
    """One decode step of B sequences, each attending ``context`` tokens (incl. the new one)."""
    ctx = np.asarray(context, dtype=np.float64)
    return build_ops(model, sc, hw, "decode", sc.batch, np.ones_like(ctx), ctx - 1.0)
