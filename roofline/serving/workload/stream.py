"""The request stream a simulation serves, as one typed value: :class:`Workload`.

Exactly one load: ``qps`` (open loop; ``arrival`` poisson | gamma (gaps of coefficient of variation
``arrival_cv``) | constant, :func:`~roofline.serving.workload.arrivals.arrival_times`), ``concurrency``
(closed loop: each of C clients sends its next request when its previous one finished) or ``trace``
(JSONL replay, :mod:`roofline.serving.workload.trace`; its hash chains are in blocks of
``trace_block_tokens``). Lengths in tokens (:func:`~roofline.serving.workload.arrivals.parse_length`).
``prefix_share`` ∈ [0, 1]: the first round(share × mean prompt) tokens of every prompt are one common
system prompt. Deterministic given ``seed``: :meth:`Workload.draw` always returns the same requests.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from roofline.boundary.limits import MAX_SIM_REQUESTS
from roofline.errors import ScenarioError
from roofline.serving.workload.arrivals import LengthArg, arrival_times, parse_length
from roofline.serving.workload.trace import HashChain, block_hashes, load_trace

#: Block size (tokens) of a trace's hash chains when the trace does not say (Mooncake's 512).
TRACE_BLOCK_TOKENS = 512


@dataclass(frozen=True)
class Requests:
    """One drawn request stream: send times (s; None for a closed loop), prompt and output tokens (int64),
    and per-request prefix hash chains in ``hash_block_tokens`` blocks (traces only)."""

    send_s: np.ndarray | None
    prompt: np.ndarray
    output: np.ndarray
    trace_hashes: list[HashChain] | None
    hash_block_tokens: int

    @property
    def prompt_mean(self) -> float:
        """Mean prompt tokens."""
        return float(self.prompt.mean())

    @property
    def output_mean(self) -> float:
        """Mean output tokens."""
        return float(self.output.mean())

    def hashes(self, block_tokens: int, prefix_share: float) -> list[HashChain] | None:
        """Hash chains per request in the engine's KV blocks of ``block_tokens``: the trace's, re-blocked;
        else, with ``prefix_share`` > 0, a common prefix of round(share × mean prompt) tokens; else None."""
        if self.trace_hashes is not None:
            return [
                block_hashes(e, int(p), block_tokens, self.hash_block_tokens)
                for e, p in zip(self.trace_hashes, self.prompt, strict=True)
            ]
        if prefix_share <= 0:
            return None
        s = round(prefix_share * self.prompt_mean)
        common = tuple(("sys", b) for b in range(s // block_tokens))
        return [common[: min(len(common), int(p) // block_tokens)] for p in self.prompt]


@dataclass(frozen=True)
class Workload:
    """What a simulation serves (see the module docstring); validated by :meth:`draw`."""

    qps: float | None = None
    concurrency: int | None = None
    trace: str | Path | None = None
    prompt_len: LengthArg = 1024
    output_len: LengthArg = 256
    num_requests: int = 2000
    seed: int = 0
    arrival: str = "poisson"
    arrival_cv: float = 1.0
    prefix_share: float = 0.0
    trace_block_tokens: int = TRACE_BLOCK_TOKENS

    def __post_init__(self) -> None:
        c = self.concurrency  # 4.0 or numpy's 4 → 4: the engine counts clients in whole numbers
        if isinstance(c, float | np.floating | np.integer) and np.isfinite(c) and float(c).is_integer() and c >= 1:
            object.__setattr__(self, "concurrency", int(c))

    @property
    def closed_loop(self) -> bool:
        """True for ``concurrency`` clients (closed loop)."""
        return self.concurrency is not None

    def with_seed(self, seed: int) -> Workload:
        """The same workload drawn with another seed."""
        return replace(self, seed=seed)

    def draw(self) -> Requests:
        """The requests of this workload (numpy's ``default_rng(seed)``: arrivals first, then lengths)."""
        if sum(x is not None for x in (self.qps, self.concurrency, self.trace)) != 1:
            raise ScenarioError("give exactly one of qps= (open loop), concurrency= (closed loop) or trace= (replay)")
        if not 0 <= self.prefix_share <= 1:
            raise ScenarioError(f"prefix_share must be between 0 and 1 (got {self.prefix_share})")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int | np.integer) or self.seed < 0:
            raise ScenarioError(f"seed must be >= 0 (got {self.seed!r}); give a whole number such as 0")
        if self.trace is not None:
            tr = load_trace(self.trace, self.trace_block_tokens)
            return Requests(tr.arrival_s, tr.prompt_tokens, tr.output_tokens, tr.hashes, self.trace_block_tokens)
        n = self.num_requests
        if not isinstance(n, int | np.integer) or isinstance(n, bool) or n < 1:
            raise ScenarioError(f"num_requests must be a whole number >= 1 (got {n!r})")
        if n > MAX_SIM_REQUESTS:
            raise ScenarioError(
                f"num_requests={n:,} exceeds {MAX_SIM_REQUESTS:,} (roofline.boundary.limits MAX_SIM_REQUESTS); "
                "percentiles settle long before that: simulate fewer requests"
            )
        rng = np.random.default_rng(self.seed)
        pl, ol = parse_length(self.prompt_len, "prompt_len"), parse_length(self.output_len, "output_len")
        send = None
        c = self.concurrency
        if self.qps is not None:
            send = arrival_times(n, float(self.qps), self.arrival, self.arrival_cv, rng)
        elif c is None or isinstance(c, bool) or not isinstance(c, int) or c < 1:  # floats: see __post_init__
            raise ScenarioError(f"concurrency must be a whole number >= 1 (got {c!r})")
        return Requests(send, pl.sample(n, rng), ol.sample(n, rng), None, self.trace_block_tokens)

    def describe(self) -> str:
        """``poisson arrivals at 10 req/s; prompt 1024, output 256 tokens`` style label."""
        if self.trace is not None:
            return f"trace {self.trace}"
        p = parse_length(self.prompt_len, "prompt_len").describe()
        o = parse_length(self.output_len, "output_len").describe()
        if self.qps is not None:
            load = f"{self.arrival} arrivals at {self.qps:g} req/s"
            if self.arrival == "gamma":
                load += f" (CV {self.arrival_cv:g})"
        else:
            load = f"closed loop, concurrency {self.concurrency}"
        extra = f", shared prefix {self.prefix_share:.0%}" if self.prefix_share else ""
        return f"{load}; prompt {p}, output {o} tokens{extra}"
