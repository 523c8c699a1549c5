"""The topology tree of the stored nodes, rebuilt only when the inventory or a node's health or
cordon state changed (building one indexes every node; reading the nodes is cheap)."""

from __future__ import annotations

import threading
from collections.abc import Iterable

from topoq.core.tree import TopologyTree, build_tree
from topoq.domain.node import NodeSpec
from topoq.domain.topology import TopologySpec


class TreeCache:
    """Thread-safe. The tree it returns is shared: callers that place on it (a scheduling
    cycle) must not run on the same tree at once, see ``Service.cycle_lock``."""

    def __init__(self, topology: TopologySpec) -> None:
        self.topology = topology
        self._key: tuple[NodeSpec, ...] | None = None
        self._tree: TopologyTree | None = None
        self._lock = threading.Lock()

    def tree(self, nodes: Iterable[NodeSpec]) -> TopologyTree:
        key = tuple(nodes)
        with self._lock:
            if self._tree is None or key != self._key:
                self._tree = build_tree(key, self.topology)
                self._key = key
            return self._tree
