"""Topology-aware gang placement: (topology + free capacity, workload) → placement or diagnosis."""

from topoq.core.ledger import CapacityLedger
from topoq.core.placement.fit import Room
from topoq.core.placement.request import SearchPlan
from topoq.core.placement.workload import (
    find_placement,
    first_fit_fits,
    place_first_fit,
    place_workload,
    query_for,
    workload_fits,
)
from topoq.domain.workload import PodSetSpec

__all__ = [
    "find_placement",
    "first_fit_fits",
    "place_first_fit",
    "place_workload",
    "pod_set_room",
    "workload_fits",
]


def pod_set_room(ledger: CapacityLedger, pod_set: PodSetSpec) -> tuple[SearchPlan, Room]:
    """The pod set's search plan and how many of its pods each domain can take now."""
    query = query_for(ledger, pod_set)
    return query.plan, query.room(ledger)
