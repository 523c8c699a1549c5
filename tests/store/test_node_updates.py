"""Node actions (cordon, uncordon, fail, recover, drain) each change one node, so concurrent
actions on different nodes — or on different fields of one node — never undo each other; on
SQLite and PostgreSQL, from several stores at once (as several API processes and the
controller write)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import pytest

from tests.store.conftest import StoreLocation
from topoq.domain.errors import InvalidInputError
from topoq.engine.intake import Intake
from topoq.store import SqlStore
from topoq.testing.governance import gpu_cluster

NODES = 80
STORES = 4
ROUNDS = 10


def stores(location: StoreLocation) -> list[SqlStore]:
    opened = [location.open() for _ in range(STORES)]
    nodes, _ = gpu_cluster([2, 5, 8])  # 80 nodes
    opened[0].save_nodes(nodes, actor="t", now=0)
    return opened


def all_at_once(actions: list[Callable[[], object]]) -> None:
    """Run every action in its own thread, released together."""
    gate = threading.Barrier(len(actions))
    errors: list[BaseException] = []

    def run(action: Callable[[], object]) -> None:
        gate.wait()
        try:
            action()
        except BaseException as error:  # reported below, in the test's thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(action,)) for action in actions]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []


def test_concurrent_cordons_of_different_nodes_all_stick(store_location: StoreLocation) -> None:
    opened = stores(store_location)
    names = [node.name for node in opened[0].nodes()]
    assert len(names) == NODES
    intakes = [Intake(store, time.time) for store in opened]
    all_at_once(
        [
            lambda i=i, name=name: intakes[i % STORES].mark_node(
                name, unschedulable=True, actor="admin"
            )
            for i, name in enumerate(names)
        ]
    )
    assert all(node.unschedulable and node.ready for node in opened[1].nodes())
    for store in opened:
        store.close()


def test_a_node_failure_sent_with_cordons_is_never_lost(store_location: StoreLocation) -> None:
    opened = stores(store_location)
    names = [node.name for node in opened[0].nodes()]
    intakes = [Intake(store, time.time) for store in opened]
    for round_number in range(ROUNDS):
        failed, cordoned = (
            names[round_number * 8],
            names[round_number * 8 + 1 : round_number * 8 + 8],
        )
        actions: list[Callable[[], object]] = [
            lambda failed=failed: intakes[0].mark_node(failed, ready=False, actor="admin")
        ]
        actions += [
            lambda i=i, name=name: intakes[1 + i % (STORES - 1)].mark_node(
                name, unschedulable=True, actor="admin"
            )
            for i, name in enumerate(cordoned)
        ]
        all_at_once(actions)
        state = {node.name: node for node in opened[2].nodes()}
        assert not state[failed].ready, f"round {round_number}: the failure was lost"
        assert all(state[name].unschedulable for name in cordoned), f"round {round_number}"
    for store in opened:
        store.close()


def test_fail_and_cordon_of_one_node_at_once_both_stick(store_location: StoreLocation) -> None:
    opened = stores(store_location)
    name = opened[0].nodes()[0].name
    first, second = Intake(opened[0], time.time), Intake(opened[1], time.time)
    for _ in range(ROUNDS):
        all_at_once(
            [
                lambda: first.mark_node(name, ready=False, actor="admin"),
                lambda: second.mark_node(name, unschedulable=True, actor="admin"),
            ]
        )
        node = next(node for node in opened[2].nodes() if node.name == name)
        assert (node.ready, node.unschedulable) == (False, True)
        first.mark_node(name, ready=True, unschedulable=False, actor="admin")
    for store in opened:
        store.close()


def test_a_node_action_changes_only_its_node_and_its_fields(store: SqlStore) -> None:
    nodes, _ = gpu_cluster([1, 2, 2])
    store.save_nodes(nodes, actor="t", now=0)
    intake = Intake(store, time.time)
    changed = intake.mark_node(nodes[1].name, unschedulable=True, actor="admin")
    assert changed.unschedulable and changed.ready and changed.labels == nodes[1].labels
    intake.mark_node(nodes[1].name, ready=False, actor="admin")
    after = store.nodes()
    assert [node.name for node in after] == [node.name for node in nodes]  # order kept
    assert (after[1].ready, after[1].unschedulable) == (False, True)
    assert after[0] == nodes[0] and after[2:] == nodes[2:]
    with pytest.raises(InvalidInputError, match="no node named 'nope'"):
        intake.mark_node("nope", unschedulable=True, actor="admin")


def test_replacing_the_inventory_keeps_what_it_says_about_health(store: SqlStore) -> None:
    nodes, _ = gpu_cluster([1, 2, 2])
    store.save_nodes(nodes, actor="t", now=0)
    Intake(store, time.time).mark_node(nodes[0].name, unschedulable=True, actor="admin")
    store.save_nodes(nodes, actor="t", now=1)  # an inventory replacement says "schedulable"
    assert store.nodes() == nodes
