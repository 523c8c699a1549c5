"""Which GPU indices of each virtual node are in use, so pods sharing a node get disjoint
``CUDA_VISIBLE_DEVICES``."""

from __future__ import annotations

from collections.abc import Iterable

from topoq.domain.errors import InvalidInputError


class GpuIndexBook:
    """Per node, the GPU indices handed out. A node with a known GPU count hands out
    ``0 … count-1``; a node whose count is unknown hands out the lowest free indices."""

    def __init__(self) -> None:
        self._in_use: dict[str, set[int]] = {}
        self._counts: dict[str, int] = {}

    def declare(self, node: str, gpus: int) -> None:
        """Record how many GPUs ``node`` has (the latest declaration wins)."""
        self._counts[node] = gpus

    def take(self, node: str, count: int) -> tuple[int, ...]:
        """``count`` free indices of ``node``, lowest first; raises when too few are free."""
        if count == 0:
            return ()
        in_use = self._in_use.setdefault(node, set())
        limit = self._counts.get(node)
        candidates = range(limit) if limit is not None else range(len(in_use) + count)
        free = [index for index in candidates if index not in in_use][:count]
        if len(free) < count:
            raise InvalidInputError(
                f"{count} GPUs asked for, {len(free)} of {limit} free",
                where=f"node {node}",
                hint="the gang's allocation books more GPUs than the node has left",
            )
        in_use.update(free)
        return tuple(free)

    def reserve(self, node: str, indices: Iterable[int]) -> None:
        """Mark ``indices`` of ``node`` in use (a pod adopted after a restart holds them)."""
        self._in_use.setdefault(node, set()).update(indices)

    def release(self, node: str, indices: Iterable[int]) -> None:
        self._in_use.get(node, set()).difference_update(indices)

    def in_use(self, node: str) -> frozenset[int]:
        return frozenset(self._in_use.get(node, ()))
