"""What the teams' jobs hold, kept as jobs start and stop holding capacity, for fair-share usage
(the simulator stores each job as it moves; the controller syncs it with each step's holders).

A team's fair-share usage accrues at its borrowed fraction while it holds capacity
(``core.fair_share.held_fractions``). Working that out from every holding job after every
cycle costs as much as there are running jobs; here the usage per team and flavor changes by
one job's allocation at a time, and the fractions are settled again only when some team's usage
(or the tree) changed: on a busy cluster one team's job often just takes the place of another
of the same team's, and nothing changed.
"""

from __future__ import annotations

from collections.abc import Mapping

from topoq.core.fair_share import borrowed_fractions
from topoq.core.holdings import capacity_by_flavor
from topoq.core.quota import QuotaBook
from topoq.core.tree import TopologyTree
from topoq.domain.governance import ClusterPolicy, FlavorName, TeamName
from topoq.domain.job import JobId, JobView
from topoq.domain.node import INSTANCE_TYPE_LABEL
from topoq.domain.resources import Resources

Usage = dict[TeamName, dict[FlavorName, Resources]]


class TeamHoldings:
    """The jobs holding capacity and what they use per team and flavor."""

    def __init__(self) -> None:
        self._jobs: dict[JobId, JobView] = {}
        self._usage: Usage = {}
        self._settled: tuple[ClusterPolicy, TopologyTree, Usage, dict[TeamName, float]] | None = (
            None
        )
        """The policy, tree and usage the fractions were last settled for, and those
        fractions."""
        self._held: dict[TeamName, float] = {}
        """Each team's borrowed fraction as the last stored cycle left the books
        (``held_fractions``)."""
        self._left: tuple[Mapping[JobId, JobView], ClusterPolicy, TopologyTree] | None = None
        """What the last stored cycle left that ``_held`` does not have yet."""

    def store(self, job: JobView) -> None:
        """Take ``job``'s new state: it holds capacity now, or no longer, or still."""
        if job.id in self._jobs:
            self._forget(job.id)
        if job.phase.holds_capacity:
            self._jobs[job.id] = job
            if job.allocation is not None:
                self._change(job.team, job.allocation.usage, add=True)

    def synced(self, holders: Mapping[JobId, JobView]) -> None:
        """Take a shell's read of every job that holds capacity (the controller's step): the
        views not taken last time are stored, the jobs no longer read let go."""
        for gone in self._jobs.keys() - holders.keys():
            self._forget(gone)
        for job_id, view in holders.items():
            if self._jobs.get(job_id) is not view:
                self.store(view)

    def left_by_cycle(
        self, holders: Mapping[JobId, JobView], policy: ClusterPolicy, tree: TopologyTree
    ) -> None:
        """A stored cycle left these ``holders`` (every job that holds capacity) under
        ``policy`` on ``tree``; taken when ``held_fractions`` is asked, not before: under
        first-come sharing no usage is kept and nobody asks (a pass over every holder and
        the books settled, each step, for nothing)."""
        self._left = (holders, policy, tree)

    def held_fractions(self) -> dict[TeamName, float]:
        """``borrowed_fractions`` of what the last stored cycle left (``left_by_cycle``):
        what each team accrues usage at until the next one."""
        left = self._left
        if left is not None:
            holders, policy, tree = left
            self.synced(holders)
            self._held = self.borrowed_fractions(policy, tree)
            self._left = None
        return self._held

    def _forget(self, job_id: JobId) -> None:
        before = self._jobs.pop(job_id)
        if before.allocation is not None:
            self._change(before.team, before.allocation.usage, add=False)

    def borrowed_fractions(
        self, policy: ClusterPolicy, tree: TopologyTree
    ) -> dict[TeamName, float]:
        """``held_fractions(policy, tree, holders)``: every borrowing team's borrowed fraction."""
        settled = self._settled
        if (
            settled is not None
            and settled[1] is tree
            and settled[2] == self._usage
            and (settled[0] is policy or settled[0] == policy)
        ):
            return settled[3]
        capacity = capacity_by_flavor(tree, INSTANCE_TYPE_LABEL)
        fractions = borrowed_fractions(QuotaBook(policy, capacity, self._usage))
        usage = {team: dict(flavors) for team, flavors in self._usage.items()}
        self._settled = (policy, tree, usage, fractions)
        return fractions

    def _change(self, team: TeamName, amounts: Mapping[FlavorName, Resources], add: bool) -> None:
        flavors = self._usage.setdefault(team, {})
        for flavor, amount in amounts.items():
            before = flavors.get(flavor, Resources())
            after = before + amount if add else before - amount
            if after:
                flavors[flavor] = after
            else:
                flavors.pop(flavor, None)
        if not flavors:
            del self._usage[team]
