"""Paged KV-cache block pool with prefix caching by block hash and LRU eviction.

Blocks are counted, not stored: ``used`` blocks are held by running requests (a block shared by
several requests through a prefix-cache hit counts once); hashed blocks no request holds stay
resident in an LRU list and are evicted, oldest first, only when a fresh block is needed. So the
blocks a new allocation may take are ``total − used`` (free plus evictable), as in vLLM's
``BlockPool`` (free queue ordered by eviction priority, cached blocks reusable until evicted).

Invariant: used + len(lru) ≤ total.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Sequence


class BlockPool:
    """KV blocks of one engine replica: ``total`` blocks of ``block_tokens`` tokens each."""

    __slots__ = ("evictions", "hits_blocks", "lru", "refs", "total", "used")

    def __init__(self, total: int) -> None:
        self.total = int(total)
        self.used = 0
        self.refs: dict[Hashable, int] = {}
        self.lru: OrderedDict[Hashable, None] = OrderedDict()
        self.hits_blocks = 0
        self.evictions = 0

    @property
    def free(self) -> int:
        """Blocks an allocation may take now (free or evictable)."""
        return self.total - self.used

    def lookup(self, hashes: Sequence[Hashable], limit: int) -> tuple[int, int]:
        """(leading blocks of ``hashes`` resident, how many of those sit in the LRU), at most ``limit``."""
        n = lru = 0
        refs, cache = self.refs, self.lru
        for h in hashes[:limit]:
            if h in refs:
                n += 1
            elif h in cache:
                n += 1
                lru += 1
            else:
                break
        return n, lru

    def acquire(self, hashes: Sequence[Hashable]) -> None:
        """Take a reference on resident blocks (cache hits); LRU blocks move back to ``used``."""
        refs, cache = self.refs, self.lru
        for h in hashes:
            if h in refs:
                refs[h] += 1
            else:
                del cache[h]
                refs[h] = 1
                self.used += 1
        self.hits_blocks += len(hashes)

    def allocate(self, n: int) -> None:
        """Take ``n`` fresh blocks, evicting the least recently used cached blocks if needed."""
        used = self.used + n
        if used > self.total:
            raise AssertionError(f"allocating {n} KV blocks with {self.total - self.used} free")
        self.used = used
        lru = self.lru
        if lru:  # without cached blocks nothing is evicted (used ≤ total)
            over = used + len(lru) - self.total
            if over > 0:
                for _ in range(over):
                    lru.popitem(last=False)
                self.evictions += over

    def register(self, h: Hashable) -> bool:
        """Name a freshly computed full block (already allocated) so later requests can hit it.

        False when an equal block is already resident (the new copy stays anonymous).
        """
        if h in self.refs or h in self.lru:
            return False
        self.refs[h] = 1
        return True

    def release(self, anonymous: int, named: Sequence[Hashable]) -> None:
        """Return a request's blocks: anonymous ones become free, named ones go to the LRU when unreferenced."""
        self.used -= anonymous
        refs, cache = self.refs, self.lru
        for h in reversed(named):  # vLLM frees the tail first so the prefix stays cached longest
            c = refs[h] - 1
            if c:
                refs[h] = c
            else:
                del refs[h]
                cache[h] = None
                self.used -= 1
