"""AIConfigurator's public disaggregated silicon rows on roofline's static model (issue #30, item 6).

Data: ``/work/shared/validation/serving/aic_silicon_sample.csv`` = ``ai-dynamo/aiconfigurator`` @ 095f58a5,
``aic-core/src/aiconfigurator_core/systems/silicon_sample.csv`` (Apache-2.0), the 1,602 rows with mode ``disagg``.

**What the columns mean**, read in AIConfigurator's own code at that commit (``aic-core/src/aiconfigurator_core/``
abbreviated ``core/``; ``src/aiconfigurator/sdk/`` abbreviated ``sdk/``):

* ``{prefill,decode}_batch_size`` is **per attention-DP rank**: ``core/sdk/backends/base_backend.py`` L712-713
  ``global_bs = bs * model.config.attention_dp_size; concurrency = global_bs`` (and L1447 ``"global_bs": b *
  attention_dp_size``). A worker's batch is B·dp.
* a **worker's GPUs** = tp × pp × attention_dp (× cp, 1 in every row): ``core/sdk/config.py`` L134-142
  ``total_gpus_per_worker``; its MoE layers span the same GPUs, tp × attention_dp = moe_tp × moe_ep, else
  ValueError (``core/sdk/config.py`` L72-132 ``resolve_moe_parallelism``). moe_tp × moe_ep is not an extra factor.
* ``*_num_workers``: replicas of each worker kind; deployment GPUs G = Gp·Np + Gd·Nd (``sdk/picking.py`` L113-115).
* the row's **concurrency** C = decode global batch × Nd (``sdk/picking.py`` L140 ``"concurrency":
  decode concurrency * decode_num_worker``) = B_d·dp_d·N_d, equal to the source note's ``silicon_concurrency``
  on every row that states it (267 of 274 complete rows; the other 7 state none).
* **TTFT** (AIC's prediction): the prefill worker's static context latency at its batch (``base_backend.py``
  L714 ``ttft = encoder_latency + context_latency``), ×1.8 for queueing (``sdk/picking.py`` L38,
  ``sdk/inference_session.py`` L279) and ×1.1 (``src/aiconfigurator/cli/api.py`` L48); **TPOT**: the decode
  worker's generation latency summed over the decode steps / (osl − 1) at its batch (``base_backend.py`` L715),
  ×1.08 (``api.py`` L49). The ×1.8/1.1/1.08 are AIC's empirical corrections: not used here (nothing is fitted).
* **tokens/s/GPU** = min(P·Np·0.9, D·Nd·0.92)·osl / G (``sdk/picking.py`` L109-120), with each worker's
  seq/s = global_bs / request latency (``base_backend.py`` L717-723): the TTFT for a prefill worker, TPOT·(osl − 1)
  for a decode worker. The 0.9/0.92 rate-matching factors are AIC's empirical ones (L32-34): left out here.
* rows without ``prefill_batch_size``, ``prefill_num_workers``, ``decode_batch_size``, ``decode_num_workers``
  (1,328 of 1,602, two older dumps with only the total concurrency): AIC cannot predict them either
  (``tools/accuracy_regression_testing/predict_silicon_sample.py`` L18, L48-51 raise "… is required for disagg
  mode"; ``tools/accuracy_tracking/make_silicon_refs.py`` L42 "older dumps lack them"). Skipped, counted.

**Mapping** (:func:`map_row`): model (DeepSeek-R1 and -V3 share one architecture, ``deepseek-v3``), hardware,
engine preset (``trtllm``, ``sglang``, ``vllm``; vLLM >= 0.14 schedules asynchronously, as the preset's source
says), weights per module group from ``gemm_quant_mode`` (attention, dense FFN, shared experts) and
``moe_quant_mode`` (routed experts), embeddings as the checkpoint; KV as the row's checkpoint states it
(:data:`CHECKPOINT_KV_DTYPE`: the engines' KV dtype ``auto`` follows the checkpoint's quantisation config), else bf16
(no row states it; AIC's default when the checkpoint states none, ``core/sdk/models/helpers.py`` L688-689;
``kv_dtype`` for a sensitivity run). Per
worker: roofline ``tp`` = tp, ``pp`` = pp, ``dp`` = attention_dp, ``batch`` = B·dp (roofline's batch is the
worker's: ⌈batch/dp⌉ per rank); ``ep`` = moe_ep, which roofline takes when dp = 1 and moe_tp·moe_ep = tp, or
dp > 1 and moe_ep = dp·tp (moe_tp 1). MoE tensor parallelism inside attention DP (dp > 1, moe_tp > 1) is **not
expressible** and skipped, counted. No row states redundant experts, overlap or MTP: 0, ``none``, off. Engine
options as AIC's benchmark generator writes them (:func:`_overrides`): ``max_num_seqs`` at least the per-rank
batch, every batch size up to it captured as a CUDA graph.

**Figures** (seconds, tokens/s/GPU), predicted (:func:`predict_row`) and measured (:func:`measured`):

* TPOT_pred = ``predict(batch=B_d·dp_d, prompt=isl, output=osl)`` on the decode worker: the mean decode step over
  contexts isl+1 … isl+osl−1 (the step at isl + osl/2 for terms linear in context). TPOT_meas = the row's.
* TTFT_pred = y + t_pre + k·TPOT_pred: t_pre the prefill worker's pass of isl at batch B_p·dp_p (engine front-end
  off), y / k the preset's request overhead and output lag. No queueing, no KV transfer. TTFT_meas = the row's.
* throughput per GPU, AIC's definition without its factors: P = B_p·dp_p / t_pre, D = B_d·dp_d / (TPOT·(osl−1)),
  X = min(Np·P, Nd·D) req/s, tput = X·osl / G. The row records no throughput: measured X = C / (TTFT + (osl−1)·TPOT)
  (Little's law for the closed loop of C clients). ``pred_tput_closed`` applies that law to the predicted latencies,
  capped at the prefill capacity: min(Np·P, C / (TTFT_pred + (osl−1)·TPOT_pred))·osl / G.
* ln error = ln(predicted / measured); APE = |predicted/measured − 1|.
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from roofline.errors import RooflineError
from roofline.prediction import predict

SOURCE_CSV = Path("/work/shared/validation/serving/aic_silicon_sample.csv")

#: AIC model_path -> roofline library model (R1 is V3's architecture with other weights).
MODEL_SPEC = {
    "deepseek-ai/DeepSeek-R1": "deepseek-v3",
    "deepseek-ai/DeepSeek-V3": "deepseek-v3",
    "moonshotai/Kimi-K2.5": "kimi-k2.5",
    "zhipuai/GLM-5": "glm-5",
    "openai/gpt-oss-120b": "gpt-oss-120b",
    "Qwen/Qwen3-32B": "qwen3-32b",
    "nvidia/Qwen3-32B-NVFP4": "qwen3-32b",
    "Qwen/Qwen3-235B-A22B-FP8": "qwen3-235b-a22b",
}
#: KV-cache format of the checkpoints whose quantisation config states one (``kv_cache_quant_algo`` in
#: ``hf_quant_config.json``). The engines' KV dtype ``auto`` keeps the checkpoint's: TensorRT-LLM
#: ``llmapi/llm_args.py`` ``KvCacheConfig.dtype = "auto"``, which AIC's generator writes for every 16-bit KV
#: (``generator/rule_plugin/trtllm.rule`` L54-55, ``templates/trtllm/extra_engine_args.*.yaml.j2``
#: ``dtype: {{ kv_cache_config.dtype | default('auto') }}``); AIC's SDK reads the same field
#: (``core/sdk/models/helpers.py`` L590, L646-647). Row paths not listed state none (bf16, or ``kv_dtype``).
#: nvidia/Qwen3-32B-NVFP4: "KV cache: FP8 (per model's quantization config)", huggingface.co/gdubicki/Qwen3-32B-NVFP4
#: (a byte-identical mirror of the NVIDIA release), as 20 of the 23 NVIDIA NVFP4 checkpoints among
#: ``/work/shared/reference/configs/deployed/`` state (``kv_cache_quant_algo: FP8``; the 3 mixed-precision ones none).
CHECKPOINT_KV_DTYPE = {"nvidia/Qwen3-32B-NVFP4": "fp8"}
#: AIC system -> roofline hardware name.
HARDWARE = {
    "h100_sxm": "h100-sxm",
    "h200_sxm": "h200-sxm",
    "b200_sxm": "b200",
    "gb200": "gb200",
    "b300_sxm": "b300",
    "gb300": "gb300",
}
GPU_FAMILY = {"h100_sxm": "hopper", "h200_sxm": "hopper", "b200_sxm": "blackwell", "gb200": "blackwell"}
#: AIC gemm/moe quant mode -> roofline weight format.
FORMAT = {
    "fp8": "fp8",
    "fp8_block": "fp8-block",
    "nvfp4": "nvfp4",
    "bfloat16": "bf16",
    "float16": "fp16",
    "w4a16_mxfp4": "mxfp4",
    "mxfp4": "mxfp4",
}
ENGINES = ("trtllm", "sglang", "vllm")
REQUIRED = ("prefill_batch_size", "prefill_num_workers", "decode_batch_size", "decode_num_workers")
SKIP_INCOMPLETE = "worker batch sizes / counts not recorded (only total concurrency); AIC refuses these too"
NOT_EXPRESSIBLE = "not yet expressible"
NO_FIT = "worker does not fit in memory per roofline (the deployment ran it)"


@dataclass(frozen=True)
class Worker:
    """One worker kind as the row states it: tp, pp, attention-DP ranks, MoE tp × ep, batch per DP rank, count."""

    tp: int
    pp: int
    dp: int
    moe_tp: int
    moe_ep: int
    batch_per_rank: int
    workers: int
    ep: int = 1  # roofline's ep (set by map_row)

    @property
    def gpus(self) -> int:
        """GPUs of one worker: tp × pp × dp (AIC ``total_gpus_per_worker``)."""
        return self.tp * self.pp * self.dp

    @property
    def batch(self) -> int:
        """Sequences one worker holds: batch per rank × dp (AIC ``global_bs``; roofline's ``batch``)."""
        return self.batch_per_rank * self.dp


@dataclass(frozen=True)
class RowMap:
    """A row mapped onto roofline's inputs."""

    model: str
    hardware: str
    engine: str
    weights: tuple[tuple[str, str], ...]
    isl: int
    osl: int
    prefill: Worker
    decode: Worker
    async_scheduling: bool | None
    kv_dtype: str = "bf16"

    @property
    def gpus(self) -> int:
        """Deployment GPUs G = Gp·Np + Gd·Nd."""
        return self.prefill.gpus * self.prefill.workers + self.decode.gpus * self.decode.workers

    @property
    def concurrency(self) -> int:
        """Closed-loop clients C = decode batch per rank × dp × decode workers."""
        return self.decode.batch * self.decode.workers


def load_rows(path: Path = SOURCE_CSV) -> pd.DataFrame:
    """The source's disaggregated rows, in file order, with ``silicon_concurrency`` parsed from the note."""
    d = pd.read_csv(path)
    d = d[d["mode"] == "disagg"].reset_index(drop=True)
    conc = d.silicon_data_source.astype(str).str.extract(r"silicon_concurrency=(\d+)")[0]
    d["silicon_concurrency"] = pd.to_numeric(conc, errors="coerce")
    return d


def _int(v: Any, default: int = 0) -> int:
    """A whole number from a CSV cell (empty / NaN -> default)."""
    return default if v is None or (isinstance(v, float) and math.isnan(v)) else int(v)


def worker(row: pd.Series, stage: str) -> Worker:
    """The ``prefill`` or ``decode`` worker of a row (moe fields 0 / empty = not stated -> 0)."""
    g = lambda f, dflt=0: _int(row.get(f"{stage}_{f}"), dflt)  # noqa: E731
    return Worker(
        g("tp_size", 1),
        g("pp_size", 1),
        g("attention_dp_size", 1),
        g("moe_tp_size"),
        g("moe_ep_size"),
        g("batch_size"),
        g("num_workers"),
    )


def roofline_ep(w: Worker, moe: bool) -> int | str:
    """roofline's ``ep`` for a worker, or why its layout cannot be expressed.

    dense: 1. dp = 1: moe_tp·moe_ep must equal tp, ep = moe_ep (≤ tp). dp > 1: the experts run either wide-EP
    over the dp·tp GPUs (moe_ep = dp·tp: ep = dp·tp) or tensor-parallel over them (moe_tp = dp·tp: ep = 1); a mix
    of the two (1 < moe_tp < dp·tp) is refused.
    """
    if not moe:
        return 1
    if w.moe_tp <= 0 and w.moe_ep <= 0:
        return "MoE layout not stated (moe_tp and moe_ep empty); AIC refuses it too"
    tp, ep = w.moe_tp or (w.tp * w.dp) // w.moe_ep, w.moe_ep or (w.tp * w.dp) // w.moe_tp
    if tp * ep != w.tp * w.dp:
        return f"moe_tp {tp} × moe_ep {ep} != tp {w.tp} × dp {w.dp}"
    if w.dp > 1 and tp == w.tp * w.dp:
        return 1  # the experts tensor-parallel over every rank's GPUs
    if w.dp > 1 and tp > 1:
        return f"{NOT_EXPRESSIBLE}: MoE tp {tp} × ep {ep} inside attention DP {w.dp} (needs ep = dp × tp or ep = 1)"
    return ep


def _weights(row: pd.Series) -> tuple[tuple[str, str], ...] | str:
    """Weight format per module group, or why the row's formats have no roofline name."""
    g, m = str(row.gemm_quant_mode), str(row.moe_quant_mode)
    if g not in FORMAT or m not in FORMAT:
        return f"quant modes {g}/{m} have no roofline format"
    dense = FORMAT[g]
    return (("attention", dense), ("dense_ffn", dense), ("shared_experts", dense), ("routed_experts", FORMAT[m]))


def _version_at_least(version: object, major: int, minor: int) -> bool:
    m = re.match(r"(\d+)\.(\d+)", str(version))
    return m is None or (int(m.group(1)), int(m.group(2))) >= (major, minor)


@functools.cache
def _library(kind: str, name: str) -> bool:
    """True when roofline's library has this hardware / model spec."""
    from roofline.specs import library

    try:
        (library.hardware if kind == "hardware" else library.model)(name)
    except RooflineError:
        return False
    return True


def map_row(row: pd.Series, kv_dtype: str = "bf16") -> RowMap | str:
    """The row's roofline inputs (:class:`RowMap`; KV as its checkpoint states, :data:`CHECKPOINT_KV_DTYPE`, else in
    ``kv_dtype``) or the reason it is skipped (a string)."""
    if any(pd.isna(row.get(f)) for f in REQUIRED):
        return SKIP_INCOMPLETE
    model = MODEL_SPEC.get(str(row.model_path))
    if model is None or not _library("model", model):
        return f"model {row.model_path} not in roofline's library"
    hw = HARDWARE.get(str(row.system), str(row.system))
    if not _library("hardware", hw):
        return f"hardware {row.system} not in roofline's library"
    if row.backend not in ENGINES:
        return f"engine {row.backend} has no roofline preset"
    weights = _weights(row)
    if isinstance(weights, str):
        return weights
    from roofline.specs import library

    moe = library.model(model).moe is not None
    stages = {}
    for stage in ("prefill", "decode"):
        w = worker(row, stage)
        ep = roofline_ep(w, moe)
        if isinstance(ep, str):
            return f"{stage}: {ep}"
        stages[stage] = replace(w, ep=ep)
    async_ = _version_at_least(row.backend_version, 0, 14) if row.backend == "vllm" else None
    return RowMap(
        model,
        hw,
        str(row.backend),
        weights,
        int(row.isl),
        int(row.osl),
        stages["prefill"],
        stages["decode"],
        async_,
        CHECKPOINT_KV_DTYPE.get(str(row.model_path), kv_dtype),
    )


def worker_overrides(m: RowMap, w: Worker, stage: str) -> dict[str, object]:
    """Engine options of one worker as AIC's benchmark generator writes them: ``max_batch_size`` = the row's batch
    (cap raised where the preset's is lower) and every batch size 1 … it captured as a CUDA graph
    (``rule_plugin/benchmark/{trtllm,sglang,vllm}.rule`` L18/L10/L10), TensorRT-LLM's prefill without the overlap
    scheduler (``trtllm.rule`` L6); vLLM's asynchronous scheduling by version; the prefill pass without the front
    end (its request overhead and output lag are added once, in :func:`predict_row`)."""
    from roofline.engine.presets import engine_preset
    from roofline.specs import library

    pre = engine_preset(m.engine, library.hardware(m.hardware))
    b = w.batch_per_rank
    over: dict[str, object] = {"max_num_seqs": max(pre.max_num_seqs, b)}
    if (pre.cuda_graph_max_batch is not None and b > pre.cuda_graph_max_batch) or not pre.cuda_graph_padding:
        over |= {"cuda_graph_max_batch": max(b, pre.cuda_graph_max_batch or b), "cuda_graph_padding": True}
    if m.async_scheduling is not None:
        over["async_scheduling"] = m.async_scheduling
    if stage == "prefill":
        over |= {"request_overhead_s": 0.0, "output_lag_steps": 0.0}
        if m.engine == "trtllm":
            over["async_scheduling"] = False
    return over


@functools.lru_cache(maxsize=4096)
def worker_prediction(m: RowMap, stage: str) -> Any:
    """roofline's prediction for the row's ``prefill`` worker (output 2 tokens) or ``decode`` worker (osl)."""
    w = m.prefill if stage == "prefill" else m.decode
    kw: dict[str, Any] = {"dp": w.dp} if w.dp > 1 else {}
    return predict(
        m.model,
        m.hardware,
        w.batch,
        m.isl,
        2 if stage == "prefill" else m.osl,
        tp=w.tp,
        pp=w.pp,
        ep=w.ep,
        **kw,
        weight_dtype=dict(m.weights),
        kv_dtype=m.kv_dtype,
        engine=m.engine,
        engine_overrides=worker_overrides(m, w, stage),
    )


def predict_row(m: RowMap) -> dict[str, float] | str:
    """Predicted TTFT / TPOT (s) and throughput per GPU (tokens/s/GPU), or why roofline refuses the row."""
    try:
        dec, pre = worker_prediction(m, "decode"), worker_prediction(m, "prefill")
    except RooflineError as e:
        return f"refused by roofline: {str(e).splitlines()[0][:160]}"
    for name, r in (("decode", dec), ("prefill", pre)):
        if not r.fits:
            return f"{name} {NO_FIT}"
    eng = dec.memory.engine
    t_pre, tpot = float(pre.ttft_s), float(dec.tpot_s)
    ttft = eng.request_overhead_s + t_pre + eng.output_lag_steps * tpot
    p_rate = m.prefill.workers * m.prefill.batch / t_pre
    d_rate = m.decode.workers * m.decode.batch / (tpot * max(m.osl - 1, 1))
    closed = min(p_rate, m.concurrency / (ttft + (m.osl - 1) * tpot))
    return {
        "pred_prefill_load": closed / p_rate,
        "pred_ttft_s": ttft,
        "pred_prefill_s": t_pre,
        "pred_tpot_s": tpot,
        "pred_tput_per_gpu": aic_tput_per_gpu(p_rate, d_rate, m.osl, m.gpus),
        "pred_tput_closed": closed * m.osl / m.gpus,
        "pred_prefill_bound": float(p_rate < d_rate),
    }


def aic_tput_per_gpu(prefill_req_s: float, decode_req_s: float, osl: int, gpus: int) -> float:
    """AIC's output tokens/s/GPU without its factors: min(prefill, decode pool req/s) · osl / GPUs."""
    return min(prefill_req_s, decode_req_s) * osl / gpus


def measured(row: pd.Series, m: RowMap) -> dict[str, float]:
    """The row's TTFT / TPOT (s) and its throughput per GPU by Little's law: C·osl / ((TTFT + (osl−1)·TPOT)·G)."""
    ttft, tpot = float(row.silicon_ttft_ms) / 1e3, float(row.silicon_tpot_ms) / 1e3
    x = m.concurrency / (ttft + (m.osl - 1) * tpot)
    return {"meas_ttft_s": ttft, "meas_tpot_s": tpot, "meas_tput_per_gpu": x * m.osl / m.gpus}
