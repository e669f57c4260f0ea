"""What every suite needs to know: device, pool, dtypes, shapes, and the distributed world.

GEMM shapes come from a model when one is given: with hidden size h, q heads H, KV heads
H_kv, head dim d, FFN width f, vocabulary V and tensor parallelism tp, the per-GPU
weight shapes (N, K) are

    QKV (H + 2·H_kv)·d/tp × h,  O h × H·d/tp,  gate_up 2f/tp × h (f/tp for a 2-matrix MLP),
    down h × f/tp,  lm_head V/tp × h,  and MoE experts 2·f_e/tp × h, h × f_e/tp.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any

from calibrate.measure.buffers import Pool

if TYPE_CHECKING:  # (SuiteContext's field ``torch`` would shadow the module's name in its annotations)
    from torch import device as TorchDevice

CPU_SHAPES = ((1024, 1024), (2048, 2048), (4096, 1024), (1024, 4096))
CPU_SHAPES_QUICK = ((1024, 1024), (2048, 2048))
GPU_SHAPES = ((4096, 4096), (8192, 8192), (14336, 4096), (4096, 14336))
GPU_SHAPES_QUICK = ((4096, 4096), (8192, 8192))


@dataclass(frozen=True)
class World:
    """torch.distributed placement from torchrun's environment (size 1 when not distributed)."""

    rank: int = 0
    size: int = 1
    local_rank: int = 0

    @classmethod
    def from_env(cls) -> World:
        """Read RANK, WORLD_SIZE and LOCAL_RANK as torchrun sets them."""
        env = os.environ
        return cls(int(env.get("RANK", 0)), int(env.get("WORLD_SIZE", 1)), int(env.get("LOCAL_RANK", 0)))


@dataclass(frozen=True)
class AttnShape:
    """Per-GPU attention heads: query heads, KV heads, head dim."""

    heads: int = 32
    kv_heads: int = 8
    head_dim: int = 128


@dataclass
class SuiteContext:
    """Shared state of one calibration run, handed to every suite."""

    torch: ModuleType
    device: TorchDevice
    is_cuda: bool
    quick: bool
    pool: Pool
    dtypes: tuple[str, ...]
    shapes: tuple[tuple[int, int], ...]
    attn: AttnShape
    world: World = field(default_factory=World)
    capability: tuple[int, int] | None = None
    mem_available: int | None = None

    # -> Any: a torch.dtype, or None for fp8 on a torch without it; suites check fp8 before they ask for it,
    # which the type cannot say
    def torch_dtype(self, name: str) -> Any:
        """torch dtype of a compute format name (tf32 computes on float32 tensors)."""
        t = self.torch
        fp8 = getattr(t, "float8_e4m3fnuz" if getattr(t.version, "hip", None) else "float8_e4m3fn", None)
        table = {
            "fp32": t.float32,
            "tf32": t.float32,
            "bf16": t.bfloat16,
            "fp16": t.float16,
            "fp8": fp8,
            "int8": t.int8,
        }
        return table[name]

    @property
    def act_dtype(self) -> str:
        """Dtype of attention and GEMV benchmarks: bf16 on GPU, fp32 on CPU."""
        return "bf16" if self.is_cuda else "fp32"


def default_dtypes(torch: ModuleType, is_cuda: bool, capability: tuple[int, int] | None) -> tuple[str, ...]:
    """GEMM dtypes to try: every format on a GPU (unsupported ones are skipped with a reason);
    fp32 plus bf16 on a CPU (a HardwareSpec needs one tensor-format peak)."""
    if not is_cuda:
        return ("fp32", "bf16")
    return ("bf16", "fp16", "fp8", "int8", "tf32", "fp32")


def model_shapes(model_name: str, tp: int) -> tuple[tuple[tuple[int, int], ...], AttnShape]:
    """Per-GPU GEMM (N, K) shapes and attention heads of ``model_name`` sharded over ``tp``."""
    import roofline

    spec = roofline.model(model_name)
    a, h = spec.attention, spec.hidden_size
    hq, hkv, d = max(1, a.num_heads // tp), max(1, a.num_kv_heads // tp), a.head_dim
    f = spec.ffn.intermediate_size
    up = 2 * f if spec.ffn.kind == "gated" else f
    shapes = [((hq + 2 * hkv) * d, h), (h, hq * d), (up // tp, h), (h, f // tp), (spec.vocab_size // tp, h)]
    if spec.moe is not None:
        fe = spec.moe.expert_intermediate_size
        shapes += [(2 * fe // tp, h), (h, max(1, fe // tp))]
    uniq = tuple(dict.fromkeys((max(1, n), max(1, k)) for n, k in shapes))
    return uniq, AttnShape(hq, hkv, d)


def coarse_to_fine(values: list[int]) -> list[int]:
    """Order values so any prefix covers the range evenly: ends first, then midpoints.

    >>> coarse_to_fine([1, 2, 4, 8, 16])
    [1, 16, 4, 2, 8]
    """
    if len(values) <= 2:
        return list(values)
    order = [0, len(values) - 1]
    spans = [(0, len(values) - 1)]
    while spans:
        nxt = []
        for lo, hi in spans:
            if hi - lo > 1:
                mid = (lo + hi) // 2
                order.append(mid)
                nxt += [(lo, mid), (mid, hi)]
        spans = nxt
    return [values[i] for i in order]
