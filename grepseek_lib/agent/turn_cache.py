"""Key/value reuse across the turns of an episode, for the HF backend's lean decode loop.

A turn's prompt is the previous turn's prompt, the reply and a tool observation, so the keys/values of all but
the newest part were computed in the previous call. After each batch every row's cache is kept with the token
ids it covers; a later prompt starting with those ids starts from them, and the model reads only the rest.
Exact by construction: a position's keys/values depend only on the ids up to it, and only a common prefix of
ids is reused (a reply whose text re-tokenizes differently is simply read again from where the ids part).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class Entry:
    """The keys/values of one sequence: `layers[l]` is (keys, values), each [heads, len(ids), head_dim]."""

    ids: tuple[int, ...]
    layers: list[tuple[Any, Any]]

    @property
    def nbytes(self) -> int:
        return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in self.layers)


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    """The length of the longest common prefix of two id sequences."""
    n = min(len(a), len(b))
    lo, hi = 0, n  # binary search on slice equality: C-speed compares instead of a Python loop per id
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def shared_prefix(prompts: Sequence[Sequence[int]]) -> int:
    """How many leading ids all `prompts` share, leaving each at least one id to read (0 for fewer than two)."""
    if len(prompts) < 2:
        return 0
    first = tuple(prompts[0])
    return max(0, min(min(common_prefix(first, tuple(p)) for p in prompts[1:]), min(map(len, prompts)) - 1))


def best_match(ids: Sequence[int], entries: Sequence[Entry]) -> tuple[Entry | None, int]:
    """The entry sharing the longest prefix with `ids` and how many positions of it to reuse (at least one id
    is always left to read: the model must see a token to predict the next)."""
    best, keep = None, 0
    t = tuple(ids)
    for entry in entries:
        n = min(common_prefix(entry.ids, t), len(ids) - 1)
        if n > keep:
            best, keep = entry, n
    return best, keep


def from_cache(cache: Any, ids: Sequence[int], row: int = 0, positions: Sequence[int] | None = None) -> Entry:
    """An Entry for `ids` from row `row` of a DynamicCache; `positions` (default: the first len(ids)) say which
    cache positions hold them, in order (a padded batch interleaves pads)."""
    import torch

    layers = []
    with torch.inference_mode():
        index = None if positions is None else torch.tensor(list(positions), device=cache.layers[0].keys.device)
        for layer in cache.layers:
            k, v = layer.keys[row], layer.values[row]
            if index is None:
                k, v = k[:, :len(ids)].clone(), v[:, :len(ids)].clone()
            else:
                k, v = k.index_select(1, index), v.index_select(1, index)
            layers.append((k, v))
    return Entry(tuple(ids), layers)


def stitched(entries: Sequence[tuple[Entry | None, int]], width: int, n_layers: int) -> list[tuple[Any, Any]]:
    """Per layer (keys, values) [rows, heads, width, head_dim]: row i holds its entry's first `keep` positions,
    zeros after them (positions the attention mask hides)."""
    import torch

    like = next(e for e, keep in entries if e is not None and keep)
    out = []
    with torch.inference_mode():
        for layer in range(n_layers):
            k0, v0 = like.layers[layer]
            k = k0.new_zeros((len(entries), k0.shape[0], width, k0.shape[-1]))
            v = v0.new_zeros((len(entries), v0.shape[0], width, v0.shape[-1]))
            for row, (entry, keep) in enumerate(entries):
                if entry is not None and keep:
                    k[row, :, :keep] = entry.layers[layer][0][:, :keep]
                    v[row, :, :keep] = entry.layers[layer][1][:, :keep]
            out.append((k, v))
    return out


class TurnCache:
    """The rows of the last `generate` call, kept within `budget_mb`, as the starting points of the next call."""

    def __init__(self, budget_mb: float = 2048):
        self.budget = int(budget_mb * 2**20)
        self.entries: list[Entry] = []
        self._pending: list[Entry] = []

    def add(self, entry: Entry) -> None:
        """Keep `entry` for the next call (installed by `commit`, so this call's other rows still match the old)."""
        used = sum(e.nbytes for e in self._pending)
        if used + entry.nbytes <= self.budget:
            self._pending.append(entry)

    def commit(self) -> None:
        self.entries, self._pending = self._pending, []

    def clear(self) -> None:
        self.entries, self._pending = [], []
