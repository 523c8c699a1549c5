"""A controller on the real store (SQLite in a test's directory) over a small cluster of 1, 2
and 4 nodes, team ``a`` guaranteed 64 GPUs, and an executor the test scripts."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from topoq.engine.controller import Controller
from topoq.store import open_store
from topoq.store.sql_store import SqlStore
from topoq.testing.fakes import ScriptedExecutor
from topoq.testing.governance import gpu_cluster, policy, team


@contextmanager
def sql_controller(
    directory: Path, clock: Callable[[], float]
) -> Iterator[tuple[Controller, SqlStore, ScriptedExecutor]]:
    nodes, spec = gpu_cluster([1, 2, 4])
    with open_store(None, directory) as store:
        store.save_nodes(nodes, actor="t", now=0)
        store.save_policy(policy(team("a", 64)), actor="t", now=0)
        executor = ScriptedExecutor()
        yield Controller(store, executor, spec, clock=clock), store, executor
