"""Holding a domain for a blocked gang, so that a stream of small jobs cannot starve it.

When a job has quota but no domain of its required level has room, the domain that comes
closest (and could hold it once its running work ends) is held for it for the rest of the
cycle: jobs considered after it backfill only elsewhere. Each cycle recomputes the choice, so
the hold follows the gang until it starts."""

from __future__ import annotations

import numpy as np

from topoq.core.admission import Attempt
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import pod_set_room
from topoq.domain.job import JobView


def domain_to_reserve(
    ledger: CapacityLedger, job: JobView, attempts: list[Attempt]
) -> tuple[int, int, str] | None:
    """(first node, end node, domain name) to hold for ``job``, or None."""
    blocked = next(
        (a for a in attempts if a.placement is not None and not a.placement.admitted), None
    )
    if blocked is None:  # waiting for quota: holding nodes would only idle them
        return None
    pod_set = max(blocked.workload.pod_sets, key=lambda ps: ps.count)
    if pod_set.topology.required is None:
        return None
    plan, room = pod_set_room(ledger, pod_set)
    _, empty_room = pod_set_room(CapacityLedger.empty_cluster(ledger.tree), pod_set)
    level = plan.strictest_level
    could_hold = np.flatnonzero(empty_room.at(level) >= pod_set.count)
    if not len(could_hold):
        return None
    rooms = room.at(level)[could_hold]
    domain = int(could_hold[np.lexsort((could_hold, -rooms))[0]])
    index = ledger.tree.levels[level]
    return (int(index.node_start[domain]), int(index.node_start[domain + 1]), index.name(domain))
