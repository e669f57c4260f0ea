"""Workload mixes: named request classes with shares, each with its own lengths, SLOs and prefix share.

A :class:`WorkloadMix` is k :class:`RequestClass` es with shares w_i > 0 and Σ w_i = 1. **Normalisation rule:**
shares that sum to 1 within :data:`SHARE_TOLERANCE` (1 %) are divided by their sum, so ``0.33, 0.33, 0.34`` or
a third written as ``0.333`` are accepted and the stored shares sum to 1 within 1e-9; a sum further from 1 is
refused, naming the sum (a share is a fraction of the requests, not a weight).

**Drawing.** Each request of a mixed stream belongs to one class, drawn independently with P(class i) = w_i from
numpy's ``default_rng([seed, CLASS_STREAM])``, a stream of its own, so the arrivals and lengths of a mix with one
class are bit for bit those of the plain workload; then, from the workload's own generator after the arrivals,
every class's prompts (class order), then every class's outputs, from that class's
:class:`~roofline.serving.workload.arrivals.LengthSpec`. With prefix_share_i > 0 a request of class i starts with
its class's common prefix of round(prefix_share_i × mean prompt of the class's drawn requests) tokens, the hash
chain ``("sys", name, block)``: classes share no prefix with each other.

**Mean request** (what the mean-value planner tiers size with): P̄ = Σ w_i·E[P_i], Ō = Σ w_i·E[O_i] tokens.

**A long-context tail** is one more class, e.g. in a mix file::

    qps: 10                  # total requests/s (optional; --qps overrides)
    classes:
      chat: {preset: chat, share: 0.6, prefix_share: 0.3}
      rag: {preset: rag, share: 0.38}
      long: {share: 0.02, prompt: 32768, output: 512, ttft_slo: 10s, tpot_slo: 80ms, ttft_pct: 90}

Parsing (:func:`roofline.serving.workload.mixparse.parse_mix`): a string of preset names with shares,
``chat:0.6,rag:0.3,summarize:0.1`` (each class the preset's fixed lengths, SLOs and percentiles, no prefix
sharing), or the path of such a YAML file.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from roofline.errors import ScenarioError
from roofline.serving.workload.arrivals import LengthSpec

#: Shares summing to 1 within this are normalised by their sum; further off they are refused.
SHARE_TOLERANCE = 0.01
#: Second word of the class generator's seed, ``default_rng([seed, CLASS_STREAM])``.
CLASS_STREAM = 0x6D6978  # "mix"


@dataclass(frozen=True)
class RequestClass:
    """One class of requests: its share of the requests, lengths (tokens), SLOs (s) at percentiles (over the
    class's requests), and the share of its mean prompt that is one common prefix of the class."""

    name: str
    share: float
    prompt: LengthSpec
    output: LengthSpec
    ttft_slo_s: float
    tpot_slo_s: float
    ttft_pct: float = 99.0
    tpot_pct: float = 90.0
    prefix_share: float = 0.0

    @property
    def slo_text(self) -> str:
        """'TTFT P99 ≤ 500 ms, TPOT P90 ≤ 50 ms'."""
        from roofline.units import fmt_seconds

        return (
            f"TTFT P{self.ttft_pct:g} ≤ {fmt_seconds(self.ttft_slo_s)}, "
            f"TPOT P{self.tpot_pct:g} ≤ {fmt_seconds(self.tpot_slo_s)}"
        )

    def describe(self) -> str:
        """'chat 60 %: prompt 1024, output 256 tokens, TTFT P99 ≤ 500 ms, TPOT P90 ≤ 50 ms' (+ prefix share)."""
        extra = f", shared prefix {self.prefix_share:.0%}" if self.prefix_share else ""
        return (
            f"{self.name} {self.share:.0%}: prompt {self.prompt.describe()}, output {self.output.describe()} tokens, "
            f"{self.slo_text}{extra}"
        )


@dataclass(frozen=True)
class WorkloadMix:
    """Request classes with shares summing to 1 (module docstring); ``qps``: the total rate (requests/s) when the
    mix states it (None: the caller gives it); ``source``: how it was given (a CLI string or a file path)."""

    classes: tuple[RequestClass, ...]
    qps: float | None = None
    source: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "classes", check_classes(self.classes))
        if self.qps is not None:
            from roofline.boundary.arguments import check_real

            q = check_real("mix qps", self.qps, "10")
            if q is None or not q > 0:
                raise ScenarioError(f"mix qps must be > 0 requests/s (got {self.qps!r}); give e.g. qps: 10")

    @property
    def names(self) -> tuple[str, ...]:
        """The class names, in order."""
        return tuple(c.name for c in self.classes)

    @property
    def shares(self) -> np.ndarray:
        """w_i, summing to 1."""
        return np.array([c.share for c in self.classes], dtype=np.float64)

    @property
    def prompt_mean(self) -> float:
        """P̄ = Σ w_i·E[P_i] (tokens)."""
        return math.fsum(c.share * c.prompt.mean for c in self.classes)

    @property
    def output_mean(self) -> float:
        """Ō = Σ w_i·E[O_i] (tokens)."""
        return math.fsum(c.share * c.output.mean for c in self.classes)

    @property
    def strictest(self) -> tuple[RequestClass, RequestClass]:
        """(the class of the smallest TTFT SLO, the class of the smallest TPOT SLO): the SLOs the mean-value
        planner tier holds the mean request to."""
        return min(self.classes, key=lambda c: c.ttft_slo_s), min(self.classes, key=lambda c: c.tpot_slo_s)

    def get(self, name: str) -> RequestClass:
        """The class named ``name``."""
        return next(c for c in self.classes if c.name == name)

    def describe(self) -> str:
        """'mix of chat 60 % (…); rag 40 % (…)'."""
        return "mix of " + "; ".join(c.describe() for c in self.classes)

    def with_prompts_scaled(self, factor: float) -> WorkloadMix:
        """The same mix with every class's prompt lengths × ``factor`` (> 0; at least 1 token)."""
        return replace(self, classes=tuple(replace(c, prompt=scale_length(c.prompt, factor)) for c in self.classes))

    def draw_classes(self, n: int, seed: int) -> np.ndarray:
        """Class index (int64) of each of ``n`` requests: independent draws with P(i) = w_i from
        ``default_rng([seed, CLASS_STREAM])``; all 0 for one class (no draw)."""
        if len(self.classes) == 1:
            return np.zeros(n, dtype=np.int64)
        rng = np.random.default_rng([int(seed), CLASS_STREAM])
        return rng.choice(len(self.classes), size=n, p=self.shares).astype(np.int64)

    def sample_lengths(self, klass: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
        """(prompt, output) tokens (int64) of requests of classes ``klass``: every class's prompts in class order,
        then every class's outputs, each from its class's LengthSpec; one class draws exactly as a plain
        workload (its n prompts, then its n outputs)."""
        n = len(klass)
        prompt, output = np.empty(n, dtype=np.int64), np.empty(n, dtype=np.int64)
        rows = [np.flatnonzero(klass == i) for i in range(len(self.classes))]
        for c, idx in zip(self.classes, rows, strict=True):
            prompt[idx] = c.prompt.sample(len(idx), rng)
        for c, idx in zip(self.classes, rows, strict=True):
            output[idx] = c.output.sample(len(idx), rng)
        return prompt, output

    def hashes(self, klass: np.ndarray, prompt: np.ndarray, block_tokens: int) -> list[tuple[object, ...]] | None:
        """Per-request prefix hash chains in KV blocks of ``block_tokens``: class i's common prefix of
        s_i = round(prefix_share_i × mean prompt of class i's requests) tokens, whole blocks only, cut at the
        request's own whole prompt blocks; None when no class shares a prefix."""
        if not any(c.prefix_share > 0 for c in self.classes):
            return None
        commons: list[tuple[object, ...]] = []
        for i, c in enumerate(self.classes):
            p = prompt[klass == i]
            s = round(c.prefix_share * float(p.mean())) if c.prefix_share > 0 and p.size else 0
            commons.append(tuple(("sys", c.name, b) for b in range(s // block_tokens)))
        return [commons[k][: min(len(commons[k]), int(p) // block_tokens)] for k, p in zip(klass, prompt, strict=True)]


def scale_length(spec: LengthSpec, factor: float) -> LengthSpec:
    """``spec`` with its lengths × ``factor``: location parameters (and a normal's std) scaled, a lognormal's CV
    kept; at least 1 token."""
    if spec.values:
        return replace(spec, values=tuple(max(1, round(v * factor)) for v in spec.values))
    a = max(1.0, round(spec.a * factor))
    if spec.dist == "lognormal":
        return replace(spec, a=a)
    b = spec.b * factor if spec.dist == "normal" else max(a, round(spec.b * factor)) if spec.dist == "uniform" else 0
    return replace(spec, a=a, b=float(b))


def check_classes(classes: Sequence[RequestClass]) -> tuple[RequestClass, ...]:
    """Validated classes (module docstring): at least one, unique names, shares > 0 normalised to sum 1, SLOs > 0,
    percentiles in (0, 100), prefix shares in [0, 1]; each error names the class and the field."""
    from roofline.boundary.arguments import check_real

    items = tuple(classes)
    if not items or not all(isinstance(c, RequestClass) for c in items):
        raise ScenarioError("a workload mix needs at least one RequestClass, e.g. 'chat:0.7,rag:0.3'")
    seen: set[str] = set()
    for c in items:
        if not isinstance(c.name, str) or not c.name.strip() or c.name in seen:
            raise ScenarioError(f"mix class names must be distinct non-empty text (got {c.name!r} twice or empty)")
        seen.add(c.name)
        share = check_real(f"mix class {c.name!r}: share", c.share, "0.3")
        if share is None or not share > 0:
            raise ScenarioError(
                f"mix class {c.name!r}: share must be > 0 (got {c.share!r}); drop the class or give it a share "
                "such as 0.1"
            )
        for field, low, high, example in (
            ("ttft_slo_s", 0.0, math.inf, "0.5"),
            ("tpot_slo_s", 0.0, math.inf, "0.05"),
            ("ttft_pct", 0.0, 100.0, "99"),
            ("tpot_pct", 0.0, 100.0, "90"),
        ):
            v = check_real(f"mix class {c.name!r}: {field}", getattr(c, field), example)
            if v is None or not low < v < high:
                raise ScenarioError(
                    f"mix class {c.name!r}: {field} must be {'in (0, 100)' if high == 100 else '> 0'} "
                    f"(got {getattr(c, field)!r}); give e.g. {field}: {example}"
                )
        ps = check_real(f"mix class {c.name!r}: prefix_share", c.prefix_share, "0.3")
        if ps is None or not 0 <= ps <= 1:
            raise ScenarioError(f"mix class {c.name!r}: prefix_share must be in [0, 1] (got {c.prefix_share!r})")
    total = math.fsum(c.share for c in items)
    if abs(total - 1.0) > SHARE_TOLERANCE:
        listed = ", ".join(f"{c.name} {c.share:g}" for c in items)
        raise ScenarioError(
            f"mix shares must sum to 1 (got {total:g}: {listed}); shares within {SHARE_TOLERANCE:.0%} of 1 are "
            "normalised, so fix the shares, e.g. chat:0.7,rag:0.3"
        )
    out = []
    for c in items:
        prompt, output = _lengths(c)
        out.append(replace(c, share=float(c.share) / total, prompt=prompt, output=output))
    return tuple(out)


def _lengths(c: RequestClass) -> tuple[LengthSpec, LengthSpec]:
    """The class's prompt and output as LengthSpecs (any length :func:`parse_length` reads); a fixed output of at
    least 2 tokens (a TPOT needs a second token)."""
    from roofline.serving.workload.arrivals import parse_length

    prompt = parse_length(c.prompt, f"mix class {c.name!r}: prompt")
    output = parse_length(c.output, f"mix class {c.name!r}: output")
    if output.dist == "fixed" and output.a < 2:
        raise ScenarioError(
            f"mix class {c.name!r}: output must be at least 2 tokens for a TPOT to exist (got {output.a:g}); "
            "give e.g. output: 256"
        )
    return prompt, output
