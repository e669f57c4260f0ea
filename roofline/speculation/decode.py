"""Cost of speculative decoding in the static model: draft + verify per step, τ tokens per step.

One speculative step of a batch of B sequences whose cache holds ``past`` tokens each:

* **verify** — the target model on V = k + 1 (or the tree size) query tokens per sequence, built
  by the ordinary op builder as a decode-phase pass with T = V new tokens (M = B·V rows through
  every GEMM, causal attention over past + V). Unlike a decode step the lm_head, final norm and
  logits gather run on all B·V positions (every drafted position needs its distribution);
* **draft** — k draft forward passes at batch B, T = 1, each:
  ``draft``: one decode step of the draft model (same tp, formats and engine as the target);
  ``eagle``/``mtp``: ``layers`` decoder layers shaped like the target's last one (its op records
  with the count scaled to one layer), the fusing projection eh_proj/fc (B × 2h → h, replicated
  across tp) and the target's embedding, final norm and lm_head (shared weights);
  ``medusa``: one pass of k heads, each a residual block and its own lm_head;
  ``ngram``: nothing on the GPU (prompt lookup runs on the CPU; assumed free).
  Draft steps run inside the engine step, so they add no per-step overhead of their own.

Step time = T_verify + T_draft (+ the option's ``overhead_s``: host work of drafting and acceptance
the kernels do not show, 0 unless given); each step emits τ tokens per sequence, so TPOT = step / τ and,
for a memory-bound target at batch 1, the speedup over plain decoding is
τ·T_target / (T_verify + T_draft). O output tokens: the first comes from prefill, the other O − 1
take (O − 1)/τ steps at caches P + τ·j (j = 0, 1, …), priced at every such step.
Assumed (no source): the draft's catch-up on the accepted tokens and its KV writes beyond the
k single-token steps, and a draft model's memory, are not counted.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from roofline.costs import step_cost
from roofline.errors import ScenarioError
from roofline.memory import kv_bytes_per_sequence_per_gpu
from roofline.ops import decode_ops
from roofline.ops.builder import build_ops, labelled_groups
from roofline.ops.records import Op, gemm
from roofline.profile import CalibrationProfile
from roofline.specs.hardware import HardwareSpec
from roofline.specs.model import ModelSpec
from roofline.specs.scenario import Scenario
from roofline.specs.speculative import SpeculativeConfig

if TYPE_CHECKING:
    from roofline.result import PredictionResult

PER_POSITION_OPS = ("final_norm", "lm_head", "comm.logits_all_gather")


def verify_ops(model: ModelSpec, sc: Scenario, hw: HardwareSpec, batch: object, tokens: int, past: object) -> list[Op]:
    """Target forward over ``tokens`` query tokens per sequence after ``past`` cached ones, logits at every position."""
    ops = build_ops(model, sc, hw, "decode", batch, float(tokens), past)
    rows = build_ops(model, sc, hw, "decode", np.asarray(batch, dtype=np.float64) * tokens, 1.0, past)
    by_name = {op.name: op for op in rows if op.name in PER_POSITION_OPS}
    return [by_name.get(op.name, op) if op.name in PER_POSITION_OPS else op for op in ops]


def head_layer_label(model: ModelSpec) -> str:
    """Builder label of the layer group an EAGLE head / MTP module is shaped like: the last layer's,
    or the last full-attention layer's when the last one is local or linear (MTP layers use full attention)."""
    groups = labelled_groups(model)
    layers = model.resolved_layers()
    for layer in (layers[-1], *reversed(layers)):
        if layer.mixer in ("global", "sparse"):
            return next(label for lay, _, label in groups if lay == layer)
    return next(label for lay, _, label in groups if lay == layers[-1])


def head_step_ops(
    model: ModelSpec, sc: Scenario, hw: HardwareSpec, batch: object, past: object, layers: int
) -> list[Op]:
    """One EAGLE/MTP draft pass: ``layers`` target-shaped decoder layers + eh_proj + embedding/norm/lm_head."""
    label = head_layer_label(model)
    per_group = {lab: n for _, n, lab in labelled_groups(model)}[label]
    ops = decode_ops(model, sc, hw, np.asarray(past, dtype=np.float64) + 1.0)
    out: list[Op] = []
    for op in ops:
        if op.layer_kind == label:
            out.append(replace(op, count=op.count * layers // per_group))  # count = layers × ops per layer
        elif op.layer_kind == "model":
            out.append(op)
    h = model.hidden_size
    a_bytes = sc.activation_memory_bytes_per_element
    fuse = gemm(
        "draft.eh_proj",
        "draft",
        "model",
        layers,
        sc.gemm_compute_dtype(hw),
        batch,
        h,
        2 * h,
        sc.weight_dtype.bytes_per_element,
        a_bytes,
    )
    if sc.cuda_graphs:
        fuse = replace(fuse, launch="graph")
    return [*out, fuse]


def medusa_ops(model: ModelSpec, sc: Scenario, hw: HardwareSpec, batch: object, heads: int) -> list[Op]:
    """Medusa heads (Cai et al. 2024, §2.1.1): head i = one residual block SiLU(W₁h) (h × h) and its own
    vocabulary projection (h × V), all k heads in one pass on the last hidden state (replicated across tp)."""
    h, v, dt = model.hidden_size, model.vocab_size, sc.gemm_compute_dtype(hw)
    wb, ab = sc.weight_dtype.bytes_per_element, sc.activation_memory_bytes_per_element
    ops = [
        gemm("draft.medusa_resblock", "draft", "model", heads, dt, batch, h, h, wb, ab, bias_bytes=h * wb),
        gemm("draft.medusa_lm_head", "draft", "model", heads, dt, batch, v, h, sc.embedding_bytes_per_element, ab),
    ]
    return [replace(op, launch="graph") for op in ops] if sc.cuda_graphs else ops


def draft_step_ops(
    model: ModelSpec, sc: Scenario, hw: HardwareSpec, spec: SpeculativeConfig, draft: ModelSpec | None, past: object
) -> list[Op]:
    """The ops of ONE draft pass (:func:`draft_passes` of them per speculative step); empty for n-gram drafting."""
    if spec.method == "ngram":
        return []
    if spec.method == "draft":
        assert draft is not None
        return decode_ops(draft, sc, hw, np.asarray(past, dtype=np.float64) + 1.0)
    if spec.method == "medusa":
        return medusa_ops(model, sc, hw, sc.batch, spec.k)
    return head_step_ops(model, sc, hw, sc.batch, past, spec.layers)


def draft_passes(spec: SpeculativeConfig) -> int:
    """Draft passes per step: k (draft model, EAGLE head, MTP: autoregressive), 1 (Medusa: all heads at once)."""
    return 1 if spec.method == "medusa" else spec.k


def draft_memory_bytes_per_gpu(
    model: ModelSpec, sc: Scenario, spec: SpeculativeConfig, draft: ModelSpec | None, context: float
) -> float:
    """Per-GPU bytes the drafter adds: its weights (sharded over tp) and, for B sequences at ``context``, its KV.

    draft model: all its weights + its KV cache; eagle: one target-shaped layer + eh_proj (2h²; lm_head and
    embedding shared) + that layer's KV; mtp: ``mtp_param_count()`` + ``layers`` layers of KV; medusa: k heads
    of h² + h + V·h weights, no KV; ngram: 0. Layer KV = the target's per-GPU KV / its attention layers.
    """
    b = float(np.asarray(sc.batch))
    wb = sc.weight_dtype.bytes_per_element
    if spec.method == "ngram":
        return 0.0
    if spec.method == "draft":
        assert draft is not None
        kv = float(kv_bytes_per_sequence_per_gpu(draft, sc, context))
        return draft.param_count() * wb / sc.tp + b * kv
    h = model.hidden_size
    if spec.method == "medusa":
        return spec.k * (h * h + h + model.vocab_size * h) * wb / sc.tp
    attn_layers = max(1, sum(1 for layer in model.resolved_layers() if layer.has_attention))
    layer_kv = float(kv_bytes_per_sequence_per_gpu(model, sc, context)) / attn_layers
    if spec.method == "mtp":
        return model.mtp_param_count() * wb / sc.tp + b * spec.layers * layer_kv
    last = model.resolved_layers()[-1]
    params = model.layer_params(last, model.moe.num_experts if model.moe else 0) + 2 * h * h
    return spec.layers * params * wb / sc.tp + b * spec.layers * layer_kv


@dataclass(frozen=True)
class SpeculativeDecode:
    """Speculative decode phase of a static batch: per-step verify and draft seconds at each step's cache.

    ``decode_s`` = mean step time × (O − 1)/τ; ``tpot_s`` = decode_s / (O − 1); ``speedup`` = plain
    decode seconds / speculative decode seconds.
    """

    config: SpeculativeConfig
    verify_s: np.ndarray
    draft_s: np.ndarray
    plain_decode_s: float
    output_len: float
    draft_bytes_per_gpu: float = 0.0

    @property
    def tokens_per_step(self) -> float:
        """τ: tokens emitted per sequence per step."""
        return self.config.tokens_per_step

    @property
    def step_s(self) -> np.ndarray:
        """Seconds of each speculative step (verify + draft + the configured per-step overhead)."""
        return self.verify_s + self.draft_s + self.config.overhead_s

    @property
    def steps(self) -> float:
        """Mean number of speculative steps: (O − 1)/τ."""
        return max(self.output_len - 1.0, 0.0) / self.tokens_per_step

    @property
    def decode_s(self) -> float:
        """Seconds of the whole decode phase."""
        return float(np.mean(self.step_s)) * self.steps

    @property
    def tpot_s(self) -> float:
        """Mean seconds per output token after the first."""
        return float(np.mean(self.step_s)) / self.tokens_per_step

    @property
    def speedup(self) -> float:
        """Plain decode time / speculative decode time (> 1: speculation pays)."""
        return self.plain_decode_s / self.decode_s if self.decode_s > 0 else float("nan")

    def summary(self) -> dict[str, float | str | int]:
        """Flat fields for JSON/CSV: method, k, τ, mean verify/draft seconds per step, speedup."""
        c = self.config
        return {
            "spec_method": c.method,
            "spec_k": c.k,
            "spec_tokens_per_step": self.tokens_per_step,
            "spec_verify_tokens": c.verify_tokens,
            "spec_verify_s": float(np.mean(self.verify_s)),
            "spec_draft_s": float(np.mean(self.draft_s)),
            "spec_speedup": self.speedup,
            "spec_draft_bytes_per_gpu": self.draft_bytes_per_gpu,
        }


def draft_step_s(
    model: ModelSpec,
    sc: Scenario,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    spec: SpeculativeConfig,
    draft: ModelSpec | None,
    past: np.ndarray,
) -> np.ndarray:
    """Draft seconds of one speculative step for each cached length in ``past`` (shape of ``past``; the batch is
    ``sc.batch``, a scalar or an array like ``past``): :func:`draft_passes` × the evaluator's time of one draft
    pass's ops less the profile's per-step overhead (the verify step carries it once); 0 for n-gram drafting.
    The one home of the draft time: the static model and the serving simulator both call it."""
    ops = draft_step_ops(model, sc, hw, spec, draft, past)
    if not ops:
        return np.zeros_like(past, dtype=np.float64)
    one = step_cost(ops, hw, prof).time_s - prof.overheads.per_step_s
    return draft_passes(spec) * np.broadcast_to(one, past.shape).astype(np.float64)


def speculative_decode(
    model: ModelSpec,
    sc: Scenario,
    hw: HardwareSpec,
    prof: CalibrationProfile,
    spec: SpeculativeConfig,
    plain_decode_s: float,
    draft: ModelSpec | None = None,
) -> SpeculativeDecode:
    """Price every speculative step of the decode phase (scalar scenario): caches P + τ·j, j < ⌈(O − 1)/τ⌉."""
    p, o = float(np.asarray(sc.prompt_len)), float(np.asarray(sc.output_len))
    tau = spec.tokens_per_step
    n = max(1, math.ceil(max(o - 1.0, 1.0) / tau))
    past = p + tau * np.arange(n, dtype=np.float64)
    verify = step_cost(verify_ops(model, sc, hw, sc.batch, spec.verify_tokens, past), hw, prof).time_s
    draft_s = draft_step_s(model, sc, hw, prof, spec, draft, past)
    mem = draft_memory_bytes_per_gpu(model, sc, spec, draft, p + o)
    verify_s = np.broadcast_to(verify, past.shape).astype(np.float64)
    return SpeculativeDecode(spec, verify_s, draft_s, plain_decode_s, o, mem)


def with_speculation(r: PredictionResult, spec: SpeculativeConfig | str) -> PredictionResult:
    """``r`` (a plain static-batch prediction) with its decode phase run speculatively.

    TTFT is unchanged; decode = Σ speculative steps; e2e = TTFT + decode; output tok/s =
    B·O / e2e × replicas (total and per-GPU likewise); TPOT first/last = first/last step / τ;
    ``tpot_steps_s`` holds step / τ per speculative step. Utilisation fields stay those of plain decoding.
    The drafter's memory (:func:`draft_memory_bytes_per_gpu`) must fit in what the batch leaves free of the
    KV budget (``memory.free_bytes``), else the result does not fit (``missing_bytes`` says by how much).
    """
    from roofline.specs.library import model as load_model

    cfg = SpeculativeConfig.parse(spec) if isinstance(spec, str) else spec
    if cfg.method == "mtp" and not r.model.mtp_layers:
        raise ScenarioError(
            f"speculative decoding: {r.model.name} ships no multi-token-prediction layers (mtp_layers = 0); "
            "use eagle (a trained head), draft:model=NAME or ngram instead"
        )
    draft = load_model(cfg.draft_model) if cfg.draft_model else None
    sc = r.scenario
    sd = speculative_decode(r.model, sc, r.hardware, r.profile, cfg, r.decode_s, draft)
    b, p, o = (float(np.asarray(x)) for x in (sc.batch, sc.prompt_len, sc.output_len))
    short = sd.draft_bytes_per_gpu - float(np.asarray(r.memory.free_bytes))
    if r.fits and short > 0:
        nan = float("nan")
        return dataclasses.replace(
            r,
            fits=False,
            missing_bytes=short,
            speculative=sd,
            ttft_s=nan,
            tpot_s=nan,
            tpot_first_s=nan,
            tpot_last_s=nan,
            e2e_s=nan,
            decode_s=nan,
            throughput_tok_s=nan,
            throughput_tok_s_per_gpu=nan,
            total_throughput_tok_s=nan,
        )
    if not r.fits:
        return dataclasses.replace(r, speculative=sd)
    e2e = r.ttft_s + sd.decode_s
    out = b * o / e2e * sc.replicas
    per_step = sd.step_s / sd.tokens_per_step
    return dataclasses.replace(
        r,
        tpot_s=sd.tpot_s,
        decode_s=sd.decode_s,
        e2e_s=e2e,
        throughput_tok_s=out,
        throughput_tok_s_per_gpu=out / sc.num_gpus,
        total_throughput_tok_s=b * (p + o) / e2e * sc.replicas,
        tpot_first_s=float(per_step[0]),
        tpot_last_s=float(per_step[-1]),
        steps_fn=lambda: per_step,
        speculative=sd,
    )
