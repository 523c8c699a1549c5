"""One scheduling cycle: ``schedule(snapshot) -> CycleResult``, a pure function.

- ``snapshot``: what a cycle may look at;
- ``state``: the cycle's working state, with one owner and named operations (what is booked,
  what is held, what was decided, which answers are shared while nothing changes);
- ``admitting``: one job's turn — quota, placement, holds, why it waits;
- ``preempting``: making room by eviction when a job does not fit;
- ``run``: the cycle as numbered phases;
- ``parking``: a cycle that carries what it parked to the next (``schedule_with_parking``);
- ``arrivals``: jobs added since the last cycle that change nothing wait as their classes did;
- ``queue``: the order the next cycle would take the waiting jobs in (``queue_order``).
"""

from topoq.core.cycle.by_phase import JobsByPhase, PhaseIndex
from topoq.core.cycle.parking import Parking, schedule_with_parking
from topoq.core.cycle.queue import queue_order
from topoq.core.cycle.run import schedule, schedule_until
from topoq.core.cycle.snapshot import PlacementMode, Snapshot

__all__ = [
    "JobsByPhase",
    "Parking",
    "PhaseIndex",
    "PlacementMode",
    "Snapshot",
    "queue_order",
    "schedule",
    "schedule_until",
    "schedule_with_parking",
]
