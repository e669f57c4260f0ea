"""The request stream a simulation serves, as one typed value: :class:`Workload`.

Exactly one load: ``qps`` (open loop; ``arrival`` poisson | gamma (gaps of coefficient of variation
``arrival_cv``) | constant, :func:`~roofline.serving.workload.arrivals.arrival_times`), ``concurrency``
(closed loop: each of C clients sends its next request when its previous one finished) or ``trace``
(JSONL replay, :mod:`roofline.serving.workload.trace`; its hash chains are in blocks of
``trace_block_tokens``). Lengths in tokens (:func:`~roofline.serving.workload.arrivals.parse_length`).
``prefix_share`` ∈ [0, 1]: the first round(share × mean prompt) tokens of every prompt are one common
system prompt. Deterministic given ``seed``: :meth:`Workload.draw` always returns the same requests.
``mix`` (a :class:`~roofline.serving.workload.mix.WorkloadMix` or its text, ``chat:0.7,rag:0.3`` or a YAML
path): each request's class drawn from the shares, its lengths and prefix from its class
(:mod:`~roofline.serving.workload.mix`);
``prompt_len``, ``output_len`` and ``prefix_share`` then stay at their defaults.

How a benchmark client sends them (:mod:`roofline.serving.sim.sends`): ``max_concurrency`` caps the requests in
flight of a rate (vLLM's / SGLang's ``--max-concurrency``); ``warmup`` requests go first and are left out of the
statistics, and with ``warmup_drained`` the measured ones wait until every warm-up request is back (aiperf);
``ramp_s`` starts closed-loop clients spread over that many seconds; ``client`` names a tool whose cited protocol
fills the fields not set (:mod:`roofline.serving.workload.clients`, ``roofline/data/clients.yaml``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from roofline.boundary.arguments import check_path, check_real, check_text, check_whole
from roofline.boundary.limits import MAX_SEQUENCE_TOKENS, MAX_SIM_REQUESTS, MAX_SIM_SPAN_S
from roofline.errors import ScenarioError
from roofline.serving.workload.arrivals import LengthArg, arrival_times, parse_length
from roofline.serving.workload.trace import HashChain, block_hashes, load_trace

if TYPE_CHECKING:
    from roofline.serving.workload.mix import WorkloadMix

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
    slots: int | None = None  # client-driven sends (roofline.serving.sim.sends): requests in flight at most
    release_s: np.ndarray | None = None  # their release times (None: all at 0)
    warmup: int = 0  # the first ``warmup`` requests are a warm-up, left out of the statistics
    warmup_drained: bool = False  # the measured requests wait for the warm-up to finish
    klass: np.ndarray | None = None  # a mix's class index per request (int64)
    mix: WorkloadMix | None = None

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
        if self.mix is not None and self.klass is not None:
            return self.mix.hashes(self.klass, self.prompt, block_tokens)
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
    max_concurrency: int | None = None
    warmup: int = 0
    warmup_drained: bool = True
    ramp_s: float = 0.0
    client: str | None = None
    mix: WorkloadMix | str | Path | None = None

    def __post_init__(self) -> None:
        if self.mix is not None:
            from roofline.serving.workload.mixparse import parse_mix

            object.__setattr__(self, "mix", parse_mix(self.mix))
        c = self.concurrency  # 4.0 or numpy's 4 → 4: the engine counts clients in whole numbers
        if isinstance(c, float | np.floating | np.integer) and np.isfinite(c) and float(c).is_integer() and c >= 1:
            object.__setattr__(self, "concurrency", int(c))

    @property
    def closed_loop(self) -> bool:
        """True for ``concurrency`` clients (closed loop)."""
        return self.concurrency is not None

    @property
    def the_mix(self) -> WorkloadMix | None:
        """The mix, parsed (None without one)."""
        from roofline.serving.workload.mix import WorkloadMix

        return self.mix if isinstance(self.mix, WorkloadMix) else None

    def with_seed(self, seed: int) -> Workload:
        """The same workload drawn with another seed."""
        return replace(self, seed=seed)

    def draw(self) -> Requests:
        """The requests of this workload (numpy's ``default_rng(seed)``: arrivals first, then lengths), with the
        benchmark client's protocol (``client``, :mod:`roofline.serving.workload.clients`) applied."""
        check_types(self)
        if self.client is not None:
            from roofline.serving.workload.clients import with_client

            return with_client(self).raw_draw()
        return self.raw_draw()

    def raw_draw(self) -> Requests:
        """:meth:`draw` of the fields as they are (no client preset applied)."""
        if sum(x is not None for x in (self.qps, self.concurrency, self.trace)) != 1:
            raise ScenarioError("give exactly one of qps= (open loop), concurrency= (closed loop) or trace= (replay)")
        if not 0 <= self.prefix_share <= 1:
            raise ScenarioError(f"prefix_share must be between 0 and 1 (got {self.prefix_share})")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int | np.integer) or self.seed < 0:
            raise ScenarioError(f"seed must be >= 0 (got {self.seed!r}); give a whole number such as 0")
        check_protocol(self)
        check_mix(self)
        if self.trace is not None:
            tr = load_trace(self.trace, self.trace_block_tokens)
            return Requests(tr.arrival_s, tr.prompt_tokens, tr.output_tokens, tr.hashes, self.trace_block_tokens)
        n = self.num_requests
        if not isinstance(n, int | np.integer) or isinstance(n, bool) or n < 1:
            raise ScenarioError(f"num_requests must be a whole number >= 1 (got {n!r})")
        n = int(n) + self.warmup
        if n > MAX_SIM_REQUESTS:
            raise ScenarioError(
                f"num_requests={n:,}{f' (with {self.warmup:,} warm-up requests)' if self.warmup else ''} exceeds "
                f"{MAX_SIM_REQUESTS:,} (roofline.boundary.limits MAX_SIM_REQUESTS); percentiles settle long before "
                "that: simulate fewer requests"
            )
        rng = np.random.default_rng(self.seed)
        pl, ol = parse_length(self.prompt_len, "prompt_len"), parse_length(self.output_len, "output_len")
        send = release = None
        c = self.concurrency
        if self.qps is not None:
            send = arrival_times(n, float(self.qps), self.arrival, self.arrival_cv, rng)
            if self.max_concurrency is not None:  # released at the rate, sent once a slot is free
                send, release, c = None, send, self.max_concurrency
        elif c is None or isinstance(c, bool) or not isinstance(c, int) or c < 1:  # floats: see __post_init__
            raise ScenarioError(f"concurrency must be a whole number >= 1 (got {c!r})")
        else:
            release = ramp_releases(n, c, self.ramp_s, self.warmup if self.warmup_drained else 0)
        mix, klass = self.the_mix, None
        if mix is None:
            prompt, output = pl.sample(n, rng), ol.sample(n, rng)
        else:
            klass = mix.draw_classes(n, int(self.seed))
            prompt, output = mix.sample_lengths(klass, rng)
        return Requests(
            send,
            prompt,
            output,
            None,
            self.trace_block_tokens,
            c,
            release,
            self.warmup,
            self.warmup_drained,
            klass,
            mix,
        )

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
            if self.ramp_s:
                load += f" (started over {self.ramp_s:g} s)"
        if self.max_concurrency is not None:
            load += f", at most {self.max_concurrency} in flight"
        if self.warmup:
            load += f", {self.warmup} warm-up requests{' drained' if self.warmup_drained else ''} left out"
        if self.client is not None:
            load += f" ({self.client} client)"
        extra = f", shared prefix {self.prefix_share:.0%}" if self.prefix_share else ""
        mix = self.the_mix
        if mix is not None:
            return f"{load}; {mix.describe()}"
        return f"{load}; prompt {p}, output {o} tokens{extra}"


def check_types(wl: Workload) -> None:
    """Refuse, by field, a value of the wrong type (text for a rate, a dict for a count, a number for a path …)
    before the client preset or any arithmetic reads it (roofline.boundary.arguments); ranges are checked later."""
    for name, example in (("qps", "2.0"), ("arrival_cv", "1.0"), ("prefix_share", "0.5"), ("ramp_s", "0.0")):
        check_real(name, getattr(wl, name), example, optional=name == "qps")
    for name, example in (("concurrency", "4"), ("max_concurrency", "8")):
        check_whole(name, getattr(wl, name), example, optional=True)
    check_whole("warmup", wl.warmup, "0")
    check_path("trace", wl.trace, "trace='requests.jsonl'", optional=True)
    check_text("arrival", wl.arrival, "poisson")
    b = check_whole("trace_block_tokens", wl.trace_block_tokens, "512")
    if not 1 <= b <= MAX_SEQUENCE_TOKENS:  # type: ignore[operator]
        raise ScenarioError(
            f"trace_block_tokens must be from 1 to {MAX_SEQUENCE_TOKENS:,} tokens (roofline.boundary.limits "
            f"MAX_SEQUENCE_TOKENS; got {b}); give the block size of the trace's hash ids, e.g. 512 (Mooncake)"
        )


def check_mix(wl: Workload) -> None:
    """A mix replaces the lengths and the prefix share, and draws its own requests (no trace)."""
    if wl.mix is None:
        return
    if wl.trace is not None:
        raise ScenarioError("a trace's requests have their own lengths: give mix= or trace=, not both")
    clash = [
        k for k, d in (("prompt_len", 1024), ("output_len", 256), ("prefix_share", 0.0)) if _given(getattr(wl, k), d)
    ]
    if clash:
        raise ScenarioError(
            f"with mix= each class sets its own lengths and prefix share: drop {', '.join(clash)} (or give the "
            "lengths in the mix's classes)"
        )


def _given(value: object, default: object) -> bool:
    try:
        return bool(value != default)
    except (TypeError, ValueError):  # an array
        return True


def ramp_releases(n: int, clients: int, ramp_s: float, phase_start: int) -> np.ndarray | None:
    """Release times of a closed loop whose ``clients`` workers start spread over ``ramp_s``: worker i's first
    request of each phase (the start, and ``phase_start`` after a drained warm-up) at i·ramp_s/C; None: all at 0."""
    if ramp_s <= 0:
        return None
    release = np.zeros(n)
    for start in {0, phase_start}:
        k = min(clients, n - start)
        release[start : start + k] = np.arange(k) * (ramp_s / clients)
    return release


def check_protocol(wl: Workload) -> None:
    """Refuse, by field and with the fix, a client protocol the load cannot run."""
    mc, w = wl.max_concurrency, wl.warmup
    if mc is not None and (isinstance(mc, bool) or not isinstance(mc, int | np.integer) or mc < 1):
        raise ScenarioError(f"max_concurrency must be a whole number >= 1 (got {mc!r})")
    if mc is not None and wl.qps is None:
        raise ScenarioError(
            "max_concurrency caps the requests in flight of a request rate (qps=): with concurrency= the clients "
            "already are the cap; drop one of them"
        )
    if isinstance(w, bool) or not isinstance(w, int | np.integer) or w < 0:
        raise ScenarioError(f"warmup must be a whole number of requests >= 0 (got {w!r})")
    if w and wl.concurrency is None and mc is None:
        raise ScenarioError(
            "warmup runs on client-driven sends: give concurrency= (closed loop) or max_concurrency= with qps=; "
            "an uncapped rate's drained warm-up is a cold start, so simulate without it"
        )
    if isinstance(wl.ramp_s, bool) or not (
        isinstance(wl.ramp_s, int | float) and np.isfinite(wl.ramp_s) and 0 <= wl.ramp_s <= MAX_SIM_SPAN_S
    ):
        raise ScenarioError(
            f"ramp_s must be a number of seconds from 0 to {MAX_SIM_SPAN_S:g} (roofline.boundary.limits "
            f"MAX_SIM_SPAN_S, what the simulated clock resolves; got {wl.ramp_s!r})"
        )
    if not isinstance(wl.warmup_drained, bool):
        raise ScenarioError(f"warmup_drained must be True or False (got {wl.warmup_drained!r})")
    if wl.ramp_s and wl.concurrency is None:
        raise ScenarioError("ramp_s spreads the start of closed-loop clients: give concurrency=, or drop ramp_s")
