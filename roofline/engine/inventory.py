"""Each engine's kernel inventory: how many GPU kernels one instance of each roofline op launches in that engine.

The op builders emit one op per piece of work (a GEMM, the attention kernel, a norm) and price each as one
kernel. An engine launches a different set: it fuses some ops into a neighbour's kernel (``kernels: 0``, with
``fused_into``), splits others into several (a KV-cache write before the attention kernel, a split-KV combine
after it), and launches kernels roofline has no op for (MoE routing and permutation, per-token activation
quantisation before an FP8 GEMM, the sampler). ``roofline/data/kernel_inventory/<engine>.yaml`` states that per
engine at the preset's version, each count cited from the engine's source at that version; the fixed per-kernel
cost (``overheads.per_kernel_graph_s`` / ``per_kernel_s``) is then paid on the engine's count:

    kernels(op) = max(0, ops[op.name][phase] + Σ extra[e][phase])  over extras e with per = op.name whose
                  conditions hold: ``formats`` holds the op's weight format, ``min_tp`` ≤ tp,
                  ``min_hidden`` ≤ hidden size, ``architectures`` holds the model's HF class and
                  ``not_architectures`` does not
    kernels(lm_head) also adds ``sampler.kernels`` (one sampling pass per forward pass)

(a negative extra is a fusion that takes the op's kernel away, e.g. TensorRT-LLM's all-reduce + RMSNorm).

An op the inventory does not list keeps the builder's count (tests check that every op the bundled models build
is listed). The ``ideal`` engine has no inventory: one kernel per op, physics only.

The count lands on :attr:`roofline.ops.records.Op.engine_kernels`; which count a step pays follows how the
profile's per-kernel cost was measured (:class:`roofline.profile.Overheads` ``graph_kernels``): the engine-kernel
profiles measured ``per_kernel_graph_s`` per engine kernel in the engines' graph replays, so their graph-replayed
decode steps pay it on this inventory, and so does the GPU side of their eager (prefill, mixed) steps, where a
run-ahead host leaves the GPU the same gap per kernel (``overheads.eager_launch`` = "run_ahead"); the default
profile fitted it to whole decode steps on one kernel per op. The host's eager launch seconds (``per_kernel_s``,
fitted end to end on one kernel per op) keep the per-op count. ``cuda_graph.max_decode_batch`` (the largest
captured decode batch) is recorded, not yet priced: a decode step above it runs eagerly in the engine.
"""

from __future__ import annotations

import functools
import weakref
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator

from roofline.errors import SpecError

INVENTORY_DIR = Path(__file__).resolve().parents[1] / "data" / "kernel_inventory"


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PhaseKernels(_Strict):
    """Kernels per instance in a prefill step and in a decode step (negative only in an extra that fuses an op's
    kernel away, e.g. TensorRT-LLM's all-reduce + residual + RMSNorm kernel taking the norm's)."""

    prefill: int = Field(ge=-16)
    decode: int = Field(ge=-16)

    def of(self, phase: str) -> int:
        """The count for ``phase`` ("prefill" or "decode")."""
        return self.prefill if phase == "prefill" else self.decode


def _phase_kernels(v: object) -> object:
    return {"prefill": v, "decode": v} if isinstance(v, int) else v


class OpKernels(_Strict):
    """One roofline op in the engine: its kernel count, the kernel it is fused into when 0, and the citation."""

    kernels: PhaseKernels
    fused_into: str | None = None
    source: str = Field(min_length=8)

    _split = field_validator("kernels", mode="before")(_phase_kernels)


class ExtraKernels(_Strict):
    """Kernels with no roofline op, launched once per instance of the op ``per`` (conditions optional)."""

    name: str
    per: str
    kernels: PhaseKernels
    formats: tuple[str, ...] | None = None
    min_tp: int = Field(default=1, ge=1)
    min_hidden: int = Field(default=0, ge=0)
    architectures: tuple[str, ...] | None = None
    not_architectures: tuple[str, ...] = ()
    source: str = Field(min_length=8)

    _split = field_validator("kernels", mode="before")(_phase_kernels)

    def applies(self, where: Where) -> bool:
        """Whether this extra runs next to an op ``where`` says (weight format, tp, model class, hidden size)."""
        return (
            where.tp >= self.min_tp
            and where.hidden_size >= self.min_hidden
            and (self.formats is None or where.weight_format in self.formats)
            and (self.architectures is None or where.architecture in self.architectures)
            and where.architecture not in self.not_architectures
        )


@dataclass(frozen=True)
class Where:
    """What an extra's conditions read: the phase, the op's weight format, tp, the model's HF class, hidden size."""

    phase: str
    weight_format: str
    tp: int
    architecture: str
    hidden_size: int


class Cited(_Strict):
    """A cited block whose other fields are free-form facts (graph capture, all-reduce, dispatch, sampler)."""

    model_config = ConfigDict(frozen=True, extra="allow")
    source: str = Field(min_length=8)


class CudaGraphs(Cited):
    """Default CUDA-graph capture: the largest decode batch replayed as a graph (larger steps run eagerly)."""

    max_decode_batch: int = Field(ge=1)


class Sampler(Cited):
    """Kernels of one sampling pass (what a benchmark client's request makes the engine run)."""

    kernels: int = Field(ge=0)


class KernelInventory(_Strict):
    """One engine version's kernels per roofline op (module docstring for the rule)."""

    engine: str
    version: str
    source_tag: str
    source: str
    path: str
    ops: Mapping[str, OpKernels]
    extra: tuple[ExtraKernels, ...] = ()
    cuda_graph: CudaGraphs
    all_reduce: Cited
    sampler: Sampler
    dispatch: tuple[Cited, ...] = ()
    notes: str = ""
    _extra_by_op: dict[str, tuple[ExtraKernels, ...]] = PrivateAttr(default_factory=dict)

    def model_post_init(self, context: object, /) -> None:
        """Index the extras by the op they hang on (each build looks them up once per op)."""
        by: dict[str, list[ExtraKernels]] = {}
        for e in self.extra:
            by.setdefault(e.per, []).append(e)
        self._extra_by_op = {k: tuple(v) for k, v in by.items()}

    def kernels(self, name: str, where: Where, default: int) -> int:
        """Kernels one instance of op ``name`` launches (``default`` when the op is not listed), at least 0."""
        entry = self.ops.get(name)
        n = (default if entry is None else entry.kernels.of(where.phase)) + self.extra_kernels(name, where)
        return max(0, n + (self.sampler.kernels if name == "lm_head" else 0))

    def extra_kernels(self, name: str, where: Where) -> int:
        """Σ kernels of the extras that hang on op ``name`` and apply ``where`` (work with no roofline op of its
        own: routing, permutation, activation quantisation)."""
        return sum(e.kernels.of(where.phase) for e in self._extra_by_op.get(name, ()) if e.applies(where))

    def kernels_at(self, name: str, where: tuple[str, str, int, str, int], default: int) -> int:
        """:meth:`kernels` at ``Where(*where)``, remembered per inventory object (every build asks for the same
        few): the inventory is frozen, so the count of one (op, place, default) never changes."""
        memo = _memo(self)
        key = (name, where, default)
        n = memo.get(key)
        if n is None:
            n = memo[key] = self.kernels(name, Where(*where), default)
        return n


_MEMO: dict[int, tuple[weakref.ref[KernelInventory], dict[tuple[str, tuple[str, str, int, str, int], int], int]]] = {}


def _memo(inv: KernelInventory) -> dict[tuple[str, tuple[str, str, int, str, int], int], int]:
    """The kernel counts :meth:`KernelInventory.kernels_at` has worked out for ``inv`` (kept while it lives)."""
    key = id(inv)
    hit = _MEMO.get(key)
    if hit is not None and hit[0]() is inv:
        return hit[1]
    memo: dict[tuple[str, tuple[str, str, int, str, int], int], int] = {}
    _MEMO[key] = (weakref.ref(inv, lambda _ref: _MEMO.pop(key, None)), memo)
    return memo


def inventory_path(engine: str) -> Path:
    """Where the shipped inventory of ``engine`` lies (whether or not it exists)."""
    return INVENTORY_DIR / f"{engine}.yaml"


@functools.lru_cache(maxsize=16)
def kernel_inventory(engine: str, version: str) -> KernelInventory | None:
    """The shipped inventory of ``engine`` at ``version``; None when none ships (``ideal``, a custom engine) or
    when the shipped one describes another version (the counts are then not known for this one)."""
    inv = shipped_inventory(engine)
    return inv if inv is not None and inv.version == version else None


@functools.lru_cache(maxsize=16)
def shipped_inventory(engine: str) -> KernelInventory | None:
    """The inventory shipped for ``engine`` at whatever version it describes (None when none ships)."""
    path = inventory_path(engine)
    return load_inventory(path) if path.is_file() else None


def load_inventory(path: Path) -> KernelInventory:
    """Parse and check one inventory file; a malformed one is a SpecError naming the field."""
    import yaml
    from pydantic import ValidationError

    loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser when built: ~10x faster
    try:
        return KernelInventory.model_validate(yaml.load(path.read_text(encoding="utf-8"), Loader=loader))
    except (ValidationError, yaml.YAMLError) as exc:
        raise SpecError(f"kernel inventory {path.name} is malformed: {exc}") from None


def shipped_inventories() -> Sequence[Path]:
    """Every shipped inventory file, sorted."""
    return sorted(INVENTORY_DIR.glob("*.yaml"))
