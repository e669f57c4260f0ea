"""A rotating buffer pool, so that repeated calls do not read from cache.

One flat byte buffer is allocated (and touched) once per run; a case takes ``count``
typed, non-overlapping views spread over it and call i uses view i mod count. When the
views together exceed twice the last-level cache, no call finds its data still cached
from the previous visit; such a case is marked ``dram`` and may set a bandwidth ceiling.
Allocating once avoids paying page faults in every case.
"""

from __future__ import annotations

import math
import mmap
from dataclasses import dataclass
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # (the Pool's field ``torch`` would shadow the module's name in its annotations)
    from torch import Tensor
    from torch import device as TorchDevice
    from torch import dtype as TorchDtype

ALIGN = 4096
FILL = 0x3C  # every byte: fp32 ≈ 0.0115, bf16 ≈ 0.0115, fp16 ≈ 1.06, fp8-e4m3 = 1.5, int8 = 60 (pages stamped unique)


@dataclass
class Pool:
    """Flat byte pool on ``device`` with typed views; ``llc_bytes`` = last-level cache size."""

    torch: ModuleType
    device: TorchDevice
    nbytes: int
    llc_bytes: int
    max_views: int = 4096  # a CUDA graph replays at most this many calls, so more views would not be visited

    def __post_init__(self) -> None:
        self.nbytes = self.nbytes // ALIGN * ALIGN
        self._map: mmap.mmap | None = None
        self._buf: Any = None

    @property
    def buf(self) -> Tensor:
        """The flat uint8 buffer, allocated and filled on first use (ranks that only run
        collectives never pay for it)."""
        if self._buf is None:
            if str(self.device) == "cpu":
                # anonymous mapping with transparent huge pages: touching 1 GiB takes ~0.5 s instead of ~3 s
                self._map = mmap.mmap(-1, self.nbytes)
                if hasattr(mmap, "MADV_HUGEPAGE"):
                    self._map.madvise(mmap.MADV_HUGEPAGE)
                self._buf = self.torch.frombuffer(self._map, dtype=self.torch.uint8)
                self._buf.fill_(FILL)
                self._stamp_pages()
            else:
                self._buf = self.torch.full((self.nbytes,), FILL, dtype=self.torch.uint8, device=self.device)
        return self._buf

    def _stamp_pages(self) -> None:
        """Make every 4 KiB page unique. A hypervisor merges identical guest pages (KSM) once
        they sit idle, and the first write to a merged page then takes a copy-on-write fault:
        measured here, a copy over 481 idle 1 MiB buffers ran at 2.1 GB/s instead of 7.1 GB/s.
        Bytes 0, 1, 4, 5 of page i encode i (< 2^22) with values 0x30–0x6F, which keep every
        fp32/bf16/fp16/fp8 element of the page a normal number (no denormals, no NaN)."""
        torch = self.torch
        pages = self._buf.view(-1, ALIGN)
        idx = torch.arange(pages.shape[0], device=pages.device)
        for col, (div, mod) in zip((0, 1, 4, 5), ((1, 64), (64, 32), (2048, 64), (131072, 32)), strict=True):
            pages[:, col] = (0x30 + (idx // div) % mod).to(torch.uint8)

    def views_needed(self, view_bytes: int, sets: int = 1, max_views: int | None = None) -> int:
        """Views (≥ 2) so that ``sets`` × views × view_bytes exceeds 2 × LLC, within the pool."""
        want = math.ceil(2 * self.llc_bytes / max(1, sets * view_bytes)) + 1
        fit = self.nbytes // max(1, sets * _aligned(view_bytes))
        return max(1, min(max(2, want), fit, max_views or self.max_views))

    def views(self, shape: tuple[int, ...], dtype: TorchDtype, count: int) -> list[Tensor]:
        """``count`` non-overlapping views of ``shape`` and ``dtype``, spread evenly over the pool.

        Falls back to separately allocated tensors (filled the same way) when one view does
        not fit in the pool.
        """
        elem = self.torch.empty((), dtype=dtype).element_size()
        numel = math.prod(shape)
        vb = _aligned(numel * elem)
        if vb > self.nbytes:
            return [self._alloc(numel * elem).view(dtype).view(shape) for _ in range(count)]
        stride = max(vb, (self.nbytes // count) // ALIGN * ALIGN)
        count = min(count, self.nbytes // stride)
        out = []
        for j in range(count):
            raw = self.buf.narrow(0, j * stride, numel * elem)
            out.append(raw.view(dtype).view(shape))
        return out

    def _alloc(self, nbytes: int) -> Tensor:
        return self.torch.full((nbytes,), FILL, dtype=self.torch.uint8, device=self.device)

    def is_dram(self, view_bytes: int, count: int, sets: int = 1) -> bool:
        """True when ``count`` × ``sets`` views of ``view_bytes`` exceed twice the last-level cache."""
        return count * sets * view_bytes >= 2 * self.llc_bytes


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN
