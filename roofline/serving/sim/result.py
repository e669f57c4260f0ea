"""The result of :func:`roofline.simulate`: summary metrics, per-request and per-event tables, plots.

Summary keys (seconds, requests/s, tokens/s), over the completed requests; definitions in
:mod:`roofline.serving.sim.metrics`. Throughputs divide by the run's duration, from the first request
sent (t = 0) to the last token, as vLLM's ``benchmark_serving`` does. ``mean_batch``: rows
(sequences) per forward step, averaged over busy time; ``mean_kv_utilization``: KV blocks held by
running requests / the pool's blocks, averaged over busy time (cached-but-free prefix blocks do not
count); ``preemptions``: requests evicted and recomputed; ``busy_fraction``: seconds the engine ran forward
steps / seconds from t = 0 to the last token (what board power scales with).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, overload

import numpy as np

from roofline.errors import ScenarioError
from roofline.serving.sim.engine import EngineSim
from roofline.serving.sim.metrics import hist_stats, stats
from roofline.serving.sim.runstats import TIMELINE_COLUMNS

if TYPE_CHECKING:
    import pandas as pd
    from matplotlib.figure import Figure

SUMMARY_KEYS = (
    *(f"{m}_{s}_s" for m in ("ttft", "tpot", "itl", "e2e") for s in ("mean", "p50", "p90", "p99")),
    "request_throughput_rps", "output_throughput_tok_s", "total_throughput_tok_s", "mean_batch",
    "mean_kv_utilization", "preemptions", "busy_fraction",
)  # fmt: skip


class Table:
    """A table attribute given as a DataFrame or as its columns (a dict of arrays), which become a DataFrame when it
    is first read: a run whose caller reads only its summary never imports pandas."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    @overload
    def __get__(self, obj: None, objtype: type | None = None) -> Table: ...
    @overload
    def __get__(self, obj: object, objtype: type | None = None) -> pd.DataFrame: ...
    def __get__(self, obj: object | None, objtype: type | None = None) -> pd.DataFrame | Table:
        if obj is None:
            return self
        value = obj.__dict__[self.slot]
        if isinstance(value, dict):
            import pandas as pd

            value = obj.__dict__[self.slot] = pd.DataFrame(value, copy=False)  # the columns are the frame's own
        return value

    def __set__(self, obj: object, value: pd.DataFrame | dict[str, np.ndarray]) -> None:
        obj.__dict__[self.slot] = value

    def columns(self, obj: object) -> dict[str, np.ndarray]:
        """The table of ``obj`` as named arrays, without building a DataFrame (the frame's columns once built)."""
        value = obj.__dict__[self.slot]
        if isinstance(value, dict):
            return value
        return {str(c): value[c].to_numpy() for c in value.columns}


@dataclass(init=False)
class SimulationResult:
    """Outcome of one simulated run (see the module docstring for the metric definitions).

    ``saturated`` is None, or a statement that the offered load exceeds what the engine can
    serve, with the sustainable rate. ``config`` records the inputs and the engine's limits. ``requests`` (one row a
    request) and ``timeline`` (one row an event) are DataFrames, built when first read (:class:`Table`).
    """

    summary: dict[str, float]
    saturated: str | None
    config: dict[str, Any]
    requests = Table()
    timeline = Table()

    def __init__(
        self,
        summary: dict[str, float],
        requests: pd.DataFrame | dict[str, np.ndarray],
        timeline: pd.DataFrame | dict[str, np.ndarray],
        saturated: str | None,
        config: dict[str, Any] | None = None,
    ) -> None:
        self.summary, self.saturated, self.config = summary, saturated, {} if config is None else config
        self.requests, self.timeline = requests, timeline

    @property
    def num_requests(self) -> int:
        """Rows of the per-request table (requests simulated), without building its DataFrame."""
        cols = SimulationResult.requests.columns(self)
        return len(next(iter(cols.values()))) if cols else 0

    def timeline_columns(self) -> dict[str, np.ndarray]:
        """The timeline (:data:`TIMELINE_COLUMNS`) as named arrays, without building its DataFrame."""
        return SimulationResult.timeline.columns(self)

    def __repr__(self) -> str:
        s = self.summary
        head = (
            f"SimulationResult({self.config.get('label', '')}: {self.num_requests} requests, "
            f"TTFT mean {s['ttft_mean_s'] * 1e3:.1f} ms p99 {s['ttft_p99_s'] * 1e3:.1f} ms, "
            f"TPOT mean {s['tpot_mean_s'] * 1e3:.2f} ms, {s['request_throughput_rps']:.2f} req/s"
        )
        return head + (f"; {self.saturated}" if self.saturated else "") + ")"

    @property
    def class_summary(self) -> pd.DataFrame | None:
        """Per class of a workload mix: share, requests, TTFT and TPOT (s) at the class's own percentiles over the
        class's finished requests, beside its SLOs (:func:`roofline.serving.sim.mixstats.class_summary`); None
        without a mix."""
        from roofline.serving.sim.mixstats import class_summary

        mix = self.config.get("mix")
        return None if mix is None else class_summary(self.requests, mix)

    def interval(self, name: str, level: float = 0.8) -> tuple[float, float]:
        """(low, high) of summary figure ``name`` (e.g. ``"ttft_p99_s"``) at ``level``.

        Latencies (``ttft_*``, ``tpot_*``, ``itl_*``, ``e2e_*``): the simulator's own error on public serving
        measurements of this engine, held out by model family (:mod:`roofline.published.serving_error`;
        asymmetric, since the simulated TTFT runs short). Throughputs: the static model's throughput regime
        (:func:`roofline.published.uncertainty.figure_interval`). Either way the workload randomness, the
        log-spread of the figure over the seeded replicas of ``simulate(..., replicas=N)`` (none with one run),
        is folded in.
        """
        from roofline.published.serving_error import serving_figure, serving_interval
        from roofline.published.uncertainty import figure_interval, replica_sigma_log

        if name not in self.summary:
            raise ScenarioError(f"no simulated figure '{name}'; intervals exist for {', '.join(self.summary)}")
        reps = [float(s[name]) for s in self.config.get("replica_summaries", []) if float(s[name]) > 0]
        extra = replica_sigma_log(reps) if len(reps) >= 2 else 0.0
        value = float(self.summary[name])
        if serving_figure(name) is not None:
            sv = serving_interval(name, value, engine=self.config.get("engine"), level=level, extra_sigma_log=extra)
            return sv.low, sv.high
        iv = figure_interval("throughput_tok_s", value, level=level, extra_sigma_log=extra)
        return iv.low, iv.high

    def _repr_html_(self) -> str:
        from roofline.report.notebook import simulation_html

        return simulation_html(self)

    def plot(self, path: str | None = None) -> Figure:
        """Latency CDFs (TTFT, TPOT, E2E) and the running/waiting/KV time series; saved to ``path`` if given.

        The figure is not registered with pyplot (a notebook shows it once, and no backend is switched)."""
        from roofline.report.charts import new_figure

        fig, axes = new_figure(11, 4, 2)
        r = self.requests
        for col in ("ttft_s", "tpot_s", "e2e_s"):
            x = np.sort(r[col].dropna().to_numpy())
            if x.size:
                axes[0].plot(x, np.arange(1, x.size + 1) / x.size, label=col[:-2].upper())
        axes[0].set_xscale("log")
        axes[0].set_xlabel("seconds")
        axes[0].set_ylabel("fraction of requests")
        axes[0].legend()
        axes[0].set_title("latency CDF")
        t = self.timeline
        axes[1].plot(t["time_s"], t["running"], label="running")
        axes[1].plot(t["time_s"], t["waiting"], label="waiting")
        ax2 = axes[1].twinx()
        total = max(self.config.get("kv_blocks", 1), 1)
        ax2.plot(t["time_s"], t["kv_blocks_used"] / total, color="grey", alpha=0.5, label="KV used")
        ax2.set_ylabel("KV blocks used (fraction)")
        axes[1].set_xlabel("time (s)")
        axes[1].set_ylabel("requests")
        axes[1].legend(loc="upper left")
        axes[1].set_title("queue and KV over time")
        if path is not None:
            fig.savefig(path)
        return fig


def build_result(sim: EngineSim, send_s: np.ndarray, config: dict[str, Any]) -> SimulationResult:
    """Collect per-request records, the timeline and the summary from a finished simulation."""
    n = sim.span  # every request up to the last that reached the queue (a spread overhead reorders entries)
    # every column an array of its own (the frame takes them without a copy), each copied once from the run
    send = np.array(sim.send[:n], dtype=np.float64)
    first, finish = _column(sim.rec_first, n, np.float64), _column(sim.rec_finish, n, np.float64)
    prompt, output = np.array(sim.prompt[:n], np.int64), np.array(sim.output[:n], np.int64)
    ttft, e2e = first - send, finish - send
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(output > 1, (e2e - ttft) / (output - 1), np.nan)
    warm = np.arange(n) < sim.warmup  # a client's warm-up: served, left out of the statistics
    df = {
        "arrival_s": send,
        "first_token_s": first,
        "finish_s": finish,
        "prompt_tokens": prompt,
        "output_tokens": output,
        "cached_tokens": _column(sim.rec_cached, n, np.int64),
        "preemptions": _column(sim.rec_preempt, n, np.int64),
        "ttft_s": ttft,
        "tpot_s": tpot,
        "e2e_s": e2e,
        "warmup": warm,
    }
    done = np.isfinite(finish) & ~warm
    start = float(np.min(send[~warm])) if sim.warmup and (~warm).any() else 0.0
    duration = float(np.max(finish[done])) - start if done.any() else float("nan")
    summary: dict[str, float] = {}
    summary |= stats("ttft", ttft[done])
    tp = tpot[done]
    summary |= stats("tpot", tp[np.isfinite(tp)])
    summary |= hist_stats(sim.hist)
    summary |= stats("e2e", e2e[done])
    summary["request_throughput_rps"] = float(done.sum() / duration)
    summary["output_throughput_tok_s"] = float(output[done].sum() / duration)
    summary["total_throughput_tok_s"] = float((output[done].sum() + prompt[done].sum()) / duration)
    busy = sim.busy_s or float("nan")
    summary["mean_batch"] = sim.batch_int / busy
    summary["mean_kv_utilization"] = sim.kv_int / busy / max(sim.pool.total, 1)
    summary["preemptions"] = float(sim.preemptions)
    span = float(np.max(finish[np.isfinite(finish)])) if np.isfinite(finish).any() else float("nan")
    summary["busy_fraction"] = min(sim.busy_s / span, 1.0) if span > 0 else float("nan")
    summary = {k: summary[k] for k in SUMMARY_KEYS}
    tl = {c: a if c == "time_s" else a.astype(np.int64) for c, a in zip(TIMELINE_COLUMNS, sim.tl, strict=True)}
    return SimulationResult(summary, df, tl, sim.saturated, config)


def _column(values: array[Any], n: int, dtype: type[np.generic]) -> np.ndarray:
    """The first ``n`` entries of a run's record array as a fresh numpy array (one copy, no intermediate slice)."""
    return np.frombuffer(values, dtype=dtype, count=n).copy() if n else np.zeros(0, dtype)
