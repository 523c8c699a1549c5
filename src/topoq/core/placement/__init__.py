"""Topology-aware gang placement: (topology + free capacity, workload) → placement or diagnosis."""

from topoq.core.placement.workload import find_placement, place_workload

__all__ = ["find_placement", "place_workload"]
