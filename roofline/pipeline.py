"""Pipeline parallelism as the engines run it: micro-batches in flight, one per stage.

With pp stages a forward pass crosses every stage in turn (T = Σ stage times + (pp − 1) hand-offs: the ops of
:func:`roofline.ops.builder.build_ops`). Run one batch at a time, each GPU would idle (pp − 1)/pp of the time, so
the engines keep L micro-batches ("lanes") in flight, each with its own running requests:

* vLLM: ``VllmConfig.max_concurrent_batches`` = pipeline_parallel_size ("PP requires PP-size concurrent batches to
  fill the pipeline", ``vllm/config/vllm.py``; the V1 ``EngineCore.step_with_batch_queue`` keeps that many batches
  queued, and a request in flight is not scheduled again until its output is back);
* SGLang: ``SchedulerPPMixin.init_pp_loop_state``: ``pp_loop_size = pp_size + pp_async_batch_depth`` (default 0),
  one running batch per micro-batch slot (``python/sglang/srt/managers/scheduler_pp_mixin.py``);
* TensorRT-LLM: ``PyExecutor.num_micro_batches = dist.pp_size`` (``tensorrt_llm/_torch/pyexecutor/py_executor.py``).

So L = pp by default (:attr:`roofline.engine.config.EngineConfig.pipeline_micro_batches` overrides it). The rules:

* **Decode.** B running requests spread over min(L, B) lanes of ⌈B / min(L, B)⌉ rows; each lane's step is a full
  pass T(lane) and the lanes follow each other through the stages, so a lane comes back every
  max(T(lane), Σ_lanes T(lane)/pp) = T(lane) (at most pp lanes of at most the largest lane's time): TPOT =
  T(⌈B / min(L, B)⌉), and the replica emits B tokens every TPOT. Against one batch at a time (TPOT T(B)) that
  gains where the pass grows with its rows (KV reads, compute); a weight-bound pass re-reads each stage's weights
  once per lane, so there the lanes buy capacity (L lanes of b rows at the TPOT of one), not speed.
* **A step with prefill chunks**: each lane carries its own budget, a request's chunk rides in one lane, and the
  step takes the busiest lane's pass (the simulator's step, :class:`roofline.serving.sim.ranks.LanedStepModel`).
* **A static batch from an idle engine** (``predict``'s prefill of B prompts at once): m = min(L, B) micro-batches
  of ⌈B/m⌉ prompts enter the first stage one stage-time apart, so the last first token is out after
  (m + pp − 1)/pp · T(⌈B/m⌉) (the pipeline's fill; its idle share is the bubble (pp − 1)/(m + pp − 1)).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from roofline.costs import PhaseCost, ScenarioCosts
    from roofline.specs.scenario import Scenario


def pipeline_lanes(sc: Scenario) -> int:
    """Micro-batches the engine keeps in flight for ``sc``: 1 without pipeline parallelism, else the engine's
    ``pipeline_micro_batches`` (None: pp, every engine's default; module docstring)."""
    if sc.pp <= 1:
        return 1
    given = None if sc.engine is None else sc.engine.pipeline_micro_batches
    return int(sc.pp if given is None else given)


def lane_rows(rows: int, lanes: int) -> int:
    """Rows of the largest lane when ``rows`` running requests spread over min(lanes, rows) lanes: ⌈rows / min⌉
    (0 for 0 rows)."""
    if rows <= 0 or lanes <= 1:
        return rows
    return -(-rows // min(lanes, rows))


def micro_batches(batch: object, lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """(m, ⌈B/m⌉): how many micro-batches a static batch of ``batch`` requests splits into (m = min(L, B)) and the
    largest one's size, elementwise over arrays."""
    b = np.asarray(batch, dtype=np.float64)
    m = np.minimum(float(lanes), np.maximum(b, 1.0))
    return m, np.ceil(b / m)


def fill_factor(m: object, pp: int) -> np.ndarray:
    """(m + pp − 1)/pp: the time to push m equal micro-batches through pp stages from idle, in passes of one."""
    return (np.asarray(m, dtype=np.float64) + pp - 1.0) / pp


def bubble_fraction(m: float, pp: int) -> float:
    """(pp − 1)/(m + pp − 1): the idle share of each stage while m micro-batches fill and drain the pipeline."""
    if m < 1 or pp < 1:
        raise ValueError(f"micro-batches m={m} and stages pp={pp} must be >= 1")
    return (pp - 1.0) / (m + pp - 1.0) if math.isfinite(m) else 0.0


def lane_batch(batch: object, lanes: int) -> tuple[np.ndarray, int | np.ndarray]:
    """(m micro-batches, the largest one's requests as ``batch`` is typed: an int for an int, an int64 array for an
    array) of :func:`micro_batches`."""
    m, b = micro_batches(batch, lanes)
    return m, (int(b) if np.ndim(np.asarray(batch)) == 0 else b.astype(np.int64))


def scaled_phase(cost: PhaseCost, time_factor: object, work_factor: object) -> PhaseCost:
    """``cost`` of one micro-batch as the batch's: time (its bound shares and CPU part) × ``time_factor``, FLOPs and
    bytes × ``work_factor`` (the m micro-batches' work)."""
    from dataclasses import replace

    f, w = np.asarray(time_factor, dtype=np.float64), np.asarray(work_factor, dtype=np.float64)
    return replace(
        cost,
        time_s=cost.time_s * f,
        flops=cost.flops * w,
        memory_bytes=cost.memory_bytes * w,
        bound_time_s={k: v * f for k, v in cost.bound_time_s.items()},
        cpu_s=cost.cpu_s * f,
        launch_s=cost.launch_s * f,
    )


def laned_costs(one: ScenarioCosts, m: object, pp: int) -> ScenarioCosts:
    """The batch's costs from one micro-batch's (``one``, priced at the largest micro-batch): the prefill takes the
    fill of m micro-batches, (m + pp − 1)/pp passes; a decode step is one lane's pass; the work is m micro-batches'
    (module docstring)."""
    from dataclasses import replace

    return replace(
        one,
        prefill=scaled_phase(one.prefill, fill_factor(m, pp), m),
        first_step=scaled_phase(one.first_step, 1.0, m),
        decode=scaled_phase(one.decode, 1.0, m),
    )
