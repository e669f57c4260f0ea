"""SpeculativeConfig: draft-and-verify decoding as a scenario option, and its CLI grammar.

A speculative step drafts k tokens per sequence, then the target model verifies them in one
forward pass over ``verify_tokens`` query tokens per sequence (k + 1 for a chain: the k drafts
plus the bonus position; more for a tree). It emits τ tokens per sequence on average:

* chain with per-token acceptance rate α: τ = Σ_{i=0}^{k} α^i = (1 − α^(k+1)) / (1 − α)
  (τ = k + 1 at α = 1) — Leviathan et al. 2023, "Fast Inference from Transformers via
  Speculative Decoding", eq. (1);
* tree methods (EAGLE-2, Medusa, …): a measured mean accepted length τ given directly.

Methods and what their draft costs (priced in :mod:`roofline.speculation.decode`):

* ``draft`` — a separate draft model (``model=NAME``), k decode steps of it;
* ``eagle`` — an EAGLE-style head (one decoder layer of the target's shape plus the target's
  lm_head), k autoregressive head steps;
* ``mtp`` — the checkpoint's multi-token-prediction layers (``ModelSpec.mtp_layers``), k steps
  of one MTP module (DeepSeek-V3 report §2.2; vLLM reuses the module for every step);
* ``medusa`` — k Medusa heads (a residual block and a vocabulary projection each), one pass;
* ``ngram`` — prompt lookup / n-gram matching on the CPU: no GPU draft cost.

CLI grammar (``--spec``)::

    METHOD[:KEY=VALUE[,KEY=VALUE...]]
    METHOD  draft | eagle | mtp | medusa | ngram
    k=INT        speculated tokens per step (draft depth), default 4
    alpha=FLOAT  per-token acceptance rate in [0, 1] (give alpha or tau, not both)
    tau=FLOAT    mean tokens emitted per step, 1 ≤ tau ≤ k + 1
    verify=INT   query tokens verified per sequence (tree size), default k + 1
    layers=INT   head / MTP layers run per draft step (eagle, mtp), default 1
    model=NAME   draft model name or path (draft only; required there)
    overhead=S   seconds added to every speculative step (tree building, acceptance, host work), default 0

e.g. ``eagle:k=4,alpha=0.8``, ``mtp:k=2,tau=2.6``, ``draft:model=llama-3.2-1b,k=5,alpha=0.7``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

from roofline.errors import ScenarioError

SpecMethod = Literal["draft", "eagle", "mtp", "medusa", "ngram"]
METHODS: tuple[str, ...] = get_args(SpecMethod)
DEFAULT_K = 4
GRAMMAR = (
    "METHOD[:KEY=VALUE,...] with METHOD one of draft, eagle, mtp, medusa, ngram and keys k (speculated tokens, "
    "default 4), alpha (per-token acceptance rate) or tau (mean tokens per step), verify (query tokens verified per "
    "sequence, default k+1), layers (head/MTP layers per draft step, default 1), model (draft model; draft only), "
    "overhead (seconds per step, default 0). "
    "Example: eagle:k=4,alpha=0.8"
)


def tokens_per_step(alpha: float, k: int) -> float:
    """Expected tokens emitted per verify step of a chain of k drafts: (1 − α^(k+1)) / (1 − α); k + 1 at α = 1."""
    if alpha >= 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


@dataclass(frozen=True)
class SpeculativeConfig:
    """One speculative-decoding setting (see the module docstring for the formulas).

    Exactly one of ``alpha`` (chain acceptance rate) and ``tau`` (mean tokens per step) is set.
    """

    method: SpecMethod
    k: int = DEFAULT_K
    alpha: float | None = None
    tau: float | None = None
    verify: int | None = None
    layers: int = 1
    draft_model: str | None = None
    overhead_s: float = 0.0

    def __post_init__(self) -> None:
        def bad(msg: str) -> ScenarioError:
            return ScenarioError(f"speculative decoding: {msg}. Grammar: {GRAMMAR}")

        if self.method not in METHODS:
            raise bad(f"method {self.method!r} is unknown; use one of {', '.join(METHODS)}")
        if self.k < 1:
            raise bad(f"k must be at least 1, got {self.k}")
        if (self.alpha is None) == (self.tau is None):
            raise bad("give exactly one of alpha (per-token acceptance rate) and tau (mean tokens per step)")
        if self.alpha is not None and not 0.0 <= self.alpha <= 1.0:
            raise bad(f"alpha is a probability in [0, 1], got {self.alpha}")
        if self.tau is not None and not 1.0 <= self.tau <= self.k + 1:
            raise bad(f"tau must lie in [1, k + 1] = [1, {self.k + 1}], got {self.tau}; raise k or lower tau")
        if self.verify is not None and self.verify < self.k + 1:
            raise bad(f"verify (tokens verified per sequence) must be at least k + 1 = {self.k + 1}, got {self.verify}")
        if not self.overhead_s >= 0.0:
            raise bad(f"overhead (seconds of CPU/bookkeeping per speculative step) must be >= 0, got {self.overhead_s}")
        if self.layers < 1:
            raise bad(f"layers must be at least 1, got {self.layers}")
        if (self.method == "draft") != (self.draft_model is not None):
            raise bad("the draft method needs model=NAME (and only it takes one), e.g. draft:model=llama-3.2-1b,k=4")

    @property
    def tokens_per_step(self) -> float:
        """τ: mean tokens emitted per sequence per verify step."""
        return self.tau if self.tau is not None else tokens_per_step(float(self.alpha or 0.0), self.k)

    @property
    def verify_tokens(self) -> int:
        """Query tokens per sequence in the verify pass: ``verify`` or k + 1."""
        return self.verify if self.verify is not None else self.k + 1

    def with_k(self, k: int) -> SpeculativeConfig:
        """The same method and acceptance rate at another k (needs alpha: a measured tau belongs to its k)."""
        if self.alpha is None:
            raise ScenarioError("a search over k needs a per-token acceptance rate alpha, not a measured tau")
        return SpeculativeConfig(self.method, k, self.alpha, None, None, self.layers, self.draft_model, self.overhead_s)

    def label(self) -> str:
        """Short text such as ``eagle k=4 α=0.8 (τ=3.36)``."""
        acc = f"α={self.alpha:g}" if self.alpha is not None else f"τ={self.tau:g}"
        model = f" {self.draft_model}" if self.draft_model else ""
        return f"{self.method}{model} k={self.k} {acc} (τ={self.tokens_per_step:.2f})"

    @classmethod
    def parse(cls, text: str, option: str = "--spec") -> SpeculativeConfig:
        """Read ``METHOD[:KEY=VALUE,...]`` (grammar in the module docstring)."""
        method, _, rest = text.strip().partition(":")
        method = method.strip().lower()
        if method not in METHODS:
            raise ScenarioError(f"{option}: method {method!r} is unknown; use one of {', '.join(METHODS)}. {GRAMMAR}")
        kw: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in rest.split(","))):
            key, eq, val = part.partition("=")
            key = key.strip().lower()
            if not eq or key not in ("k", "alpha", "tau", "verify", "layers", "model", "overhead"):
                raise ScenarioError(f"{option}: cannot read {part!r}; write KEY=VALUE. {GRAMMAR}")
            kw[key] = val.strip()
        try:
            return cls(
                method=method,  # type: ignore[arg-type]
                k=int(kw.get("k", DEFAULT_K)),
                alpha=float(kw["alpha"]) if "alpha" in kw else None,
                tau=float(kw["tau"]) if "tau" in kw else None,
                verify=int(kw["verify"]) if "verify" in kw else None,
                layers=int(kw.get("layers", 1)),
                draft_model=kw.get("model"),
                overhead_s=float(kw.get("overhead", 0.0)),
            )
        except ValueError as e:
            if isinstance(e, ScenarioError):
                raise
            raise ScenarioError(f"{option}: {e}; numbers expected for k, alpha, tau, verify, layers. {GRAMMAR}") from e
