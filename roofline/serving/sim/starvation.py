"""Engine configurations that starve, detected after a run and said with the knob to change.

Two ways a scheduler can leave the GPU idle while requests wait, both checked on the finished run:

* **A prompt that cannot share a step with any decode.** With chunked prefill off, a prompt of P tokens is
  scheduled in one step of at most ``max_num_batched_tokens`` = B tokens. Under a decodes-first scheduler (vLLM,
  TensorRT-LLM in-flight batching) every running decode takes one token of that budget first, so a prompt with
  P > B − 1 can join no step in which anything decodes: it waits until every running request has finished, and
  the engine serves one such request at a time (mean batch near 1). A prefill-first scheduler (SGLang) runs
  prefills alone anyway and is not starved this way.
* **A mean batch far below the clients.** In a closed loop of C clients, a mean batch below C / 4 while more than
  C / 4 requests wait on average means a limit binds: ``max_num_seqs`` below C, a KV pool that holds fewer than C
  requests of the mean length, or the token budget.

:func:`starvation` returns the statement (None when neither holds); ``roofline.simulate`` stores it in
``config["starvation"]`` and the CLI prints it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from roofline.engine.config import EngineConfig

#: A closed loop whose mean batch and mean queue are on opposite sides of this share of its clients is starved.
LOW_BATCH_SHARE = 0.25


def starvation(
    engine: EngineConfig,
    prefill_first: bool,
    prompt: np.ndarray,
    output: np.ndarray,
    kv_tokens: int,
    mean_batch: float,
    timeline: Mapping[str, np.ndarray],
    concurrency: int | None,
) -> str | None:
    """The starvation statement of a finished run (module docstring), or None; ``timeline``: its columns by name
    (:meth:`~roofline.serving.sim.result.SimulationResult.timeline_columns`)."""
    budget = engine.max_num_batched_tokens
    if not engine.chunked_prefill and not prefill_first:
        big = prompt > budget - 1
        if big.any():
            p_max = int(prompt.max())
            rows = min(concurrency or engine.max_num_seqs, engine.max_num_seqs)
            return (
                f"{big.mean():.0%} of the prompts (up to {p_max:,} tokens) can never be scheduled next to a running "
                f"decode: chunked prefill is off and max_num_batched_tokens={budget:,} leaves {budget - 1:,} tokens "
                f"once one request decodes, so each waits until every running request finishes (mean batch "
                f"{mean_batch:.1f}). Raise --engine-set max_num_batched_tokens={p_max + rows:,} (the prompt next to "
                f"{rows} decodes) or set chunked_prefill=true"
            )
    if concurrency is None or concurrency < 8 or not len(timeline["time_s"]):
        return None
    waiting = _time_mean(timeline, "waiting")
    if not (mean_batch < LOW_BATCH_SHARE * concurrency < waiting):
        return None
    per_request = float(np.mean(prompt + output))
    if engine.max_num_seqs < concurrency:
        limit = f"max_num_seqs={engine.max_num_seqs} admits fewer than the {concurrency} clients"
        knob = f"max_num_seqs={concurrency}"
    elif kv_tokens < concurrency * per_request:
        limit = f"the KV pool holds {kv_tokens:,} tokens, {kv_tokens / per_request:.0f} requests of the mean length"
        knob = "gpu_memory_utilization (or a larger tp, or fp8 KV)"
    else:
        limit = f"the token budget max_num_batched_tokens={budget:,} admits few prompts a step"
        knob = f"max_num_batched_tokens={2 * budget:,}"
    return (
        f"mean batch {mean_batch:.1f} with {concurrency} clients while {waiting:.0f} requests wait on average: "
        f"{limit}. Raise --engine-set {knob}"
    )


def _time_mean(timeline: Mapping[str, np.ndarray], column: str) -> float:
    """Time-weighted mean of a timeline column (each value holds until the next event)."""
    t = np.asarray(timeline["time_s"], dtype=np.float64)
    v = np.asarray(timeline[column], dtype=np.float64)
    if t.size < 2 or t[-1] <= t[0]:
        return float(v.mean()) if v.size else 0.0
    return float(np.sum(v[:-1] * np.diff(t)) / (t[-1] - t[0]))
