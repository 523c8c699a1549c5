"""The executor's nodes merged with the cordons and failures set through topoq: the side that
changed a flag last wins."""

from __future__ import annotations

from dataclasses import replace

from topoq.core.inventory_merge import merged_inventory
from topoq.domain.node import NodeName, NodeSpec

A, B = NodeName("a"), NodeName("b")


def node(name: NodeName, *, unschedulable: bool = False, ready: bool = True) -> NodeSpec:
    return NodeSpec(name, unschedulable=unschedulable, ready=ready)


def test_a_cordon_set_through_topoq_outlives_a_report_of_an_unrelated_change() -> None:
    previous = {A: node(A), B: node(B)}
    stored = {A: node(A, unschedulable=True), B: node(B, ready=False)}  # topoq: cordon, fail
    reported = [node(A), node(B, unschedulable=True)]  # kubectl cordon b
    merged = {n.name: n for n in merged_inventory(reported, previous, stored)}
    assert merged[A].unschedulable is True  # topoq's cordon stands
    assert merged[B].unschedulable is True and merged[B].ready is False  # both sides' changes


def test_a_flag_the_cluster_changed_takes_the_clusters_value() -> None:
    previous = {A: node(A, unschedulable=True, ready=False)}
    stored = {A: node(A, unschedulable=True, ready=False)}
    reported = [node(A)]  # kubectl uncordon a; it became Ready
    [merged] = merged_inventory(reported, previous, stored)
    assert (merged.unschedulable, merged.ready) == (False, True)


def test_new_nodes_and_a_first_report_are_taken_as_reported() -> None:
    reported = [node(A), replace(node(B), labels={"zone": "z"})]
    assert merged_inventory(reported, {}, {A: node(A, unschedulable=True)}) == reported
    assert merged_inventory(reported, {A: node(A)}, {}) == reported


def test_a_node_the_cluster_reports_not_ready_stays_failed_whatever_topoq_set() -> None:
    previous = {A: node(A, ready=False)}
    stored = {A: node(A, ready=True)}  # topoq node recover, while the cluster still says down
    [merged] = merged_inventory([node(A, ready=False)], previous, stored)
    assert merged.ready is False  # a gang placed there could not start
