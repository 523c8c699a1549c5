"""A cycle's working state, with one owner: ``CycleState``.

It keeps what is booked (the capacity ledger and the quota books), what is held (node holds
for blocked or starving gangs, quota holds for queue heads), what was decided (admissions,
preemptions, diagnostics) and which jobs' failures are known for their equivalence class.
Every change goes through a named operation, and every change ends the current **epoch**:
answers computed on the state are shared between jobs only within one epoch, so sharing never
changes an answer. Most answers are on the books and the ledger, or on books and ledgers
derived from them by named holds (a quota check, a placement, the capacity and books a job may
use, why it waits): their keys name the holds they depend on, so they last until the books or
the ledger change, across the epochs that a new hold ends. Only answers on the set of holds
itself are forgotten with every hold.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import NamedTuple, TypeVar

from topoq.core.admission import (
    Attempt,
    QuotaHold,
    Shape,
    allocation_of,
    flavors_for,
    in_flavor,
    workload_shape,
)
from topoq.core.backfill import Ending, NodeHold, backfills, confined_to_unheld, endings
from topoq.core.cycle.snapshot import PlacementMode, Snapshot
from topoq.core.diagnostics import WaitIdentity
from topoq.core.holdings import PreparedLedger, flavor_values, total_demand
from topoq.core.holds import alike, within_guarantee
from topoq.core.ledger import CapacityLedger
from topoq.core.ordering import (
    Lineup,
    OrderFacts,
    OrderKey,
    Passes,
    Queued,
    eviction_key,
    line_up,
    order_facts,
    priority_of,
)
from topoq.core.placement import place_first_fit, place_workload
from topoq.core.preemption import UNBOUNDED, HeldArrays, TrialBudget
from topoq.core.quota import QuotaBook, QuotaCheck
from topoq.core.quota_wait import RunningWork
from topoq.core.time_limits import time_limit_of
from topoq.domain.decisions import Admit, Diagnostic, Preempt
from topoq.domain.governance import ClusterPolicy, FlavorName, QueueingStrategy, TeamName
from topoq.domain.job import Allocation, JobId, JobView
from topoq.domain.node import NodeName
from topoq.domain.placement import PlacementResult
from topoq.domain.resources import Resources
from topoq.domain.workload import WorkloadSpec

T = TypeVar("T")

JobClass = tuple[TeamName, int, Hashable, float | None]
"""Jobs that share one answer in a cycle: team, priority, shape (what decides where a job
can go, without its name) and time limit."""

JobFacts = tuple[JobView, JobClass, float | None, OrderFacts]
"""A job, its class, its time limit and what its place in the order needs."""

Failure = tuple[Diagnostic, WaitIdentity | None]
"""Why a job waits, and the identity of its wait when the next cycle may keep it as it is
(None: worked out afresh every cycle)."""


def class_of_job(
    policy: ClusterPolicy, job: JobView, shape: Hashable, limit: float | None
) -> JobClass:
    """The job's class (``JobClass``), its ``shape`` and time ``limit`` worked out."""
    return (job.team, priority_of(policy, job), shape, limit)


class HeldBack(NamedTuple):
    """A held-back job's answer if one alike was found (``failure``), and what to share its
    own under otherwise (``key``: None when nothing may be shared)."""

    key: tuple[Hashable, CapacityLedger] | None
    failure: Failure | None


class ParkedClass(NamedTuple):
    """A class whose first try was held back by its team's quota hold and waited for quota
    on the team's own figures alone (``QuotaCheck.team_only``, no placement tried): the
    team's usage of each flavor tried, and the identity of its wait. While a hold of its
    team binds it and those figures stand, the class waits the same way
    (``CycleState.parked_failure``): the books without the holds refuse it as they did, and
    the books with them, which only add to what is used, refuse it too."""

    figures: tuple[object, ...]
    identity: WaitIdentity


InFlavor = tuple[FlavorName, WorkloadSpec]
"""A flavor a job may use, and its workload restricted to it."""

ParkedWait = tuple[WaitIdentity, Diagnostic]
"""How a job waited after a cycle: the identity of its wait and its diagnostic."""


@dataclass(frozen=True)
class Carried:
    """What a cycle hands to the next on the same policy and tree (``cycle.parking``)."""

    waits: Mapping[JobId, ParkedWait]
    facts: Mapping[JobId, JobFacts]
    prepared: PreparedLedger | None = None
    """The capacity the holders left as the cycle began: the next cycle's is derived from it
    by the holders that changed."""
    lineup: Lineup | None = None
    """The ready jobs in their teams' queues: the next cycle's are brought up to date from
    these by the jobs that came and went."""
    settled: Mapping[TeamName, SettledWaits] = field(default_factory=dict)
    """How the jobs of each team that left the order settled waited."""
    class_numbers: dict[JobClass, int] = field(default_factory=dict)
    """A number for each class met on this policy (``CycleState.class_number``); the cycles
    after add the classes they meet (equal classes keep one number)."""
    parked_classes: Mapping[int, ParkedClass] = field(default_factory=dict)
    """The classes (by number) that waited on their team's own figures, and what on."""
    in_flavors: Mapping[tuple[TeamName, int], tuple[WorkloadSpec, list[InFlavor]]] = field(
        default_factory=dict
    )
    """Each workload the cycle tried restricted to each flavor its team may use (by the
    workload's ``id``; the workload is kept, so the id stays its own): on the same policy and
    tree the next cycle takes them as they are, and the shapes of the very same restricted
    workloads with them."""
    shapes: Mapping[int, tuple[Shape, WorkloadSpec]] = field(default_factory=dict)
    """Each workload's shape the cycle worked out (by ``id``, the workload kept)."""
    priorities: dict[tuple[TeamName, Hashable, float | None], list[int]] = field(
        default_factory=dict
    )
    """The numbers of the classes met of each team, shape and time limit (one per priority),
    grown with ``class_numbers``: a job held back by its team's quota hold fails for all of
    them (``CycleState.held_back_at_every_priority``)."""
    held: Mapping[int, HeldArrays] = field(default_factory=dict)
    """What each running job's allocation holds on which nodes, as arrays, for victim
    searches (``preemption.TrialBudget.held``): those of jobs that still hold capacity."""
    books: QuotaBook | None = None
    """The quota books as the cycle began (``prepared``'s usage, nothing charged; never
    changed): the next cycle's are derived from them by the teams whose usage moved
    (``QuotaBook.following``)."""
    eviction: EvictionOrder | None = None
    """The holders in eviction order as the cycle last sorted them: the next cycle's are
    brought up to date from it by the holders that came and went."""
    failures: Mapping[int, Failure] | None = None
    """The classes (by number) whose failure stood when the cycle ended: a job of one of them
    that arrives after the cycle, at the end of its team's queue, waits as it failed
    (``cycle.arrivals``). None: the cycle's failures do not say so (victims stopped for a
    preemptor, whose turns are not of that kind, or the cycle stopped at a job's turn)."""
    guard_passes_after: OrderKey | tuple[()] | None = None
    """A job that passes the starvation guard after the cycle changes none of its answers
    when its key in the guard's order (``ordering.key_on_books`` on ``books``) comes after
    this: the key of the starving job the cycle held for (``holds.hold_for_starving``), or
    ``()`` where nothing is held for starving jobs. None: any may change them."""
    arrived: tuple[Queued, ...] = ()
    """The jobs added since the cycle without one (``cycle.arrivals``), with their facts."""


@dataclass(frozen=True)
class EvictionOrder:
    """Holders in eviction order (``ordering.eviction_key``), their keys, and the ``id``s of
    those very views (the list keeps them alive, so the ids stay theirs)."""

    jobs: tuple[JobView, ...]
    keys: tuple[tuple[int, float, str], ...]
    ids: frozenset[int]


@dataclass(frozen=True)
class SettledWaits:
    """How a team's jobs waited when it left the order settled (``CycleState.settle_rest``):
    their entries in its queue, in order, with their ids, parked waits and diagnostics, and
    the identity each of their classes failed with. The next cycle, the same entries of a team
    settled again under the same failures wait the same way: these are taken as they are."""

    entries: list[Queued]
    ids: list[JobId]
    parked: list[ParkedWait]
    said: list[Diagnostic]
    failures: Mapping[int, WaitIdentity]


REUSED_FROM_WITHIN = 64
"""How far into the last cycle's settled jobs of a team the first of this cycle's is looked
for (its jobs admitted since come off the front: a few)."""


class CycleState:
    """The state one cycle works on; never escapes the cycle."""

    guard_passes_after: OrderKey | tuple[()] | None = None
    """See ``Carried.guard_passes_after`` (set once the starvation guard's holds are made)."""

    def __init__(
        self,
        snapshot: Snapshot,
        ledger: CapacityLedger,
        book: QuotaBook,
        holders: dict[JobId, JobView],
        carried: Carried | None = None,
        trial_placements: int = UNBOUNDED,
        prepared: PreparedLedger | None = None,
        *,
        held_back_across_priorities: bool = True,
        books: QuotaBook | None = None,
    ) -> None:
        self.snapshot = snapshot
        self._books = books
        """The books as the cycle began, handed on (``Carried.books``); ``book`` is the
        cycle's own copy."""
        self.held_back_across_priorities, self._prepared = held_back_across_priorities, prepared
        self._carried = carried or Carried({}, {})
        self.previous = self._carried.waits
        """How the jobs waited after the cycle before (parked), see ``parked_wait``."""
        self._settled: dict[TeamName, SettledWaits] = {}
        self._parked_classes: dict[int, ParkedClass] = {}
        self.lineup: Lineup | None = None
        self.facts: dict[JobId, JobFacts] = {}
        """The class and time limit of each job the cycle looked at (``facts_of``)."""
        self.waits: dict[JobId, ParkedWait] = {}
        """How the jobs diagnosed in this cycle wait, for the next."""
        self.ledger = ledger
        self.book = book
        self.holders = holders
        self.admissions: list[Admit] = []
        self.preemptions: list[Preempt] = []
        self.diagnostics: list[Diagnostic] = []
        self._nothing_evicted()
        self.stopping_for: dict[JobId, list[JobView]] = {}
        """The victims still stopping (PREEMPTING) of each pending preemptor."""
        self._nothing_held()
        self.eta_teams: set[TeamName] = set()
        """Teams whose first waiting job was given an ETA (one per team per cycle)."""
        self.gaining_teams: set[TeamName] = set()
        self.losing_teams: set[TeamName] = set()
        """Teams that won or lost work to another team's preemption this cycle: neither is
        turned around in the same cycle, so work is not evicted only to be readmitted."""
        self.blocked_teams: set[TeamName] = set()
        self.strict_teams = frozenset(
            spec.name
            for spec in snapshot.policy.teams
            if spec.queueing is QueueingStrategy.STRICT_FIFO
        )
        """Teams that queue strict-fifo: a waiting job blocks the team's later jobs."""
        self.trial_budget = TrialBudget(trial_placements, self._carried.held)
        """What the victim searches of this cycle may still try (``cycle.preempting``)."""
        self._holders_to_come: set[JobId] = set()
        """Jobs that hold something and whose turn in the order is still to come."""
        self._failed_tails: dict[TeamName, tuple[int, int, tuple[int, int]]] = {}
        """For each team, where the jobs it has left that are all of classes that failed
        begin in its queue, and how many classes had failed then, while failures stand
        (``settle_rest``); and where its jobs that settled last cycle begin and end in its
        queue, when they are there still in a row (``_settled_run``)."""
        self._failed: dict[int, Failure] = {}
        """Classes that could not be admitted nor make room: within a cycle capacity and
        quota only get used up, so a job of the same class fails the same way (until a hold
        is released)."""
        self._nothing_known()
        self._ending: tuple[tuple[int, int], list[Ending]] | None = None
        self._shapes: dict[int, tuple[Shape, WorkloadSpec]] = {}
        """Each workload's shape by ``id`` (the workload is kept so the id stays its own)."""
        self._values = flavor_values(snapshot.tree, snapshot.flavor_label)
        first_fit = snapshot.placement is PlacementMode.FIRST_FIT
        self._place = place_first_fit if first_fit else place_workload
        """How this cycle places a gang (``Snapshot.placement``)."""
        self._in_flavors: dict[tuple[TeamName, int], tuple[WorkloadSpec, list[InFlavor]]] = {}
        """Each workload restricted to each flavor its team may use, in the order tried."""

    def _nothing_known(self) -> None:
        self.epoch = 0
        """How many times the books or the ledger changed (the pending order follows it)."""
        self._shared: dict[Hashable, object] = {}
        """Answers computed in the current epoch (see the module's docstring)."""
        self._booked: dict[Hashable, object] = {}
        """Answers on the books and the ledger, and on those derived from them by the holds
        their keys name (a check, why a job waits): a new hold changes none of them, so these
        outlive an epoch that a hold ended, until the next booking. A key may name an object
        by ``id``: the answer keeps that object, so the id stays its own while it is known."""
        self._on_ledger: dict[Hashable, object] = {}
        """Answers on the ledger alone, and on ledgers derived from it by the holds their keys
        name (a placement, the capacity a job may use): kept as ``_booked``, and also through
        bookings that leave the ledger as it was — quota charged or released, a victim
        evicted (it keeps its nodes until it stops) — until a job is admitted onto nodes."""

    def _nothing_evicted(self) -> None:
        self.evicting: set[JobId] = set()
        self._evicted: list[JobId] = []
        """``evicting`` in the order of eviction."""
        self._running_lists: dict[FlavorName, tuple[list[JobView], int, int]] = {}
        """``running_on`` each flavor as last worked out, with the holders and evictions it
        counted."""

    def _nothing_held(self) -> None:
        self.reserved: list[NodeHold] = []
        """Nodes held for blocked gangs (a required domain, or a starving gang's nodes)."""
        self._holding_nodes: set[JobId] = set()
        """The jobs ``reserved`` holds nodes for."""
        self.reserving_teams: set[TeamName] = set()
        self.team_holds: dict[TeamName, QuotaHold] = {}
        """Quota held for each team's first waiting job (its queue head) against the team's
        own later jobs (and other teams' borrowing once it starves), so that smaller jobs
        cannot keep it waiting forever."""
        self._holds_made: list[object] = []
        """Every hold of the cycle, kept so that an answer keyed by a hold's ``id`` is never
        taken for another hold's."""

    @property
    def policy(self) -> ClusterPolicy:
        return self.snapshot.policy

    # --- sharing answers within an epoch ---------------------------------------------------
    def shared(
        self,
        key: Hashable,
        compute: Callable[[], T],
        *,
        booked: bool = False,
        on_ledger: bool = False,
    ) -> T:
        """``compute()``, once per epoch for ``key`` (``booked``: an answer on the books and
        the ledger alone, kept until they change; ``on_ledger``: on the ledger alone, kept
        until it changes)."""
        answers = self._on_ledger if on_ledger else self._booked if booked else self._shared
        try:
            return answers[key]  # type: ignore[return-value]
        except KeyError:
            value = compute()
            answers[key] = value
            return value

    def shared_on(
        self, kept: object, key: Hashable, compute: Callable[[], T], *, on_ledger: bool = False
    ) -> T:
        """``shared(key, compute, booked=True)`` (or ``on_ledger=True``) for a key that names
        ``kept`` (an object, or a tuple of them) by ``id``: the answer keeps it, so that the id
        stays its own while the answer is known."""
        answers = self._on_ledger if on_ledger else self._booked
        found = answers.get(key)
        if found is not None:
            return found[1]  # type: ignore[index, no-any-return]
        value = compute()
        answers[key] = (kept, value)
        return value

    def _booked_answer(self, key: Hashable) -> object | None:
        """The answer ``shared_on`` keeps under ``key`` (None: none yet; no answer kept that
        way is None)."""
        found = self._booked.get(key)
        return found[1] if found is not None else None  # type: ignore[index]

    def _changed(self, *, booking: bool = True, ledger: bool = True) -> None:
        """End the epoch; ``booking``: the books or the ledger changed, not only a hold;
        ``ledger``: a booking that changed the ledger (not only the books)."""
        self._shared.clear()
        if booking:
            self._booked.clear()
            if ledger:
                self._on_ledger.clear()
            self.epoch += 1

    def shape_of(self, workload: WorkloadSpec) -> Shape:
        """``workload_shape``, once per workload of the cycle."""
        key = id(workload)
        known = self._shapes.get(key)
        if known is None:
            known = self._carried.shapes.get(key)
            if known is None or known[1] is not workload:
                known = (workload_shape(workload), workload)
            self._shapes[key] = known
        return known[0]

    def facts_of(self, job: JobView) -> JobFacts:
        """The job's class and time limit, worked out once per job (and kept for the next
        cycle on the same policy while the job stays the very same object)."""
        facts = self.facts.get(job.id)
        if facts is not None:
            return facts
        facts = self._carried.facts.get(job.id)
        if facts is None or facts[0] is not job:
            limit = time_limit_of(self.policy, job)
            shape = self.shape_of(job.spec.workload)
            job_class = class_of_job(self.policy, job, shape, limit)
            numbers = self._carried.class_numbers
            number = numbers.get(job_class)
            if number is None:
                number = numbers[job_class] = len(numbers)
                self._carried.priorities.setdefault((job.team, shape, limit), []).append(number)
            facts = (
                job,
                job_class,
                limit,
                order_facts(self.policy, job, number, shape.demand),
            )
        self.facts[job.id] = facts
        return facts

    def class_of(self, job: JobView) -> JobClass:
        return self.facts_of(job)[1]

    def class_number(self, job: JobView) -> int:
        """The number of the job's class, the same for equal classes in this cycle and the
        ones after it on the same policy (what failures are remembered by: a number hashes
        and compares at once)."""
        return self.facts_of(job)[3].alike

    def order_of(self, job: JobView) -> OrderFacts:
        return self.facts_of(job)[3]

    def _backfills(self, job: JobView, expected_start: float | None) -> bool:
        """Whether the job may use capacity held for a gang expected to start then."""
        return backfills(self.facts_of(job)[2], self.snapshot.now, expected_start)

    # --- what is booked -------------------------------------------------------------------
    def charge_quota(self, team: TeamName, flavor: FlavorName, amount: Resources) -> None:
        self.book.charge(team, flavor, amount)
        self._changed(ledger=False)

    def release_quota(self, team: TeamName, flavor: FlavorName, amount: Resources) -> None:
        self.book.release(team, flavor, amount)
        self._changed(ledger=False)

    def admit(self, job: JobView, allocation: Allocation) -> None:
        """Book the job's nodes and quota, and let go of what was held for it."""
        self.admissions.append(Admit(job.id, allocation))
        tree = self.ledger.tree
        for node, resources in allocation.resources_on_node.items():
            self.ledger.charge_node(
                tree.node_index[NodeName(node)], tree.resource_vector(resources)
            )
        for flavor, amount in allocation.usage.items():
            self.book.charge(job.team, flavor, amount)
        self.holders[job.id] = job
        self._changed()
        self._release_holds_of(job)

    def evict(self, victim: JobView) -> None:
        """The victim is being stopped: never chosen again; it keeps its nodes until then."""
        self.evicting.add(victim.id)
        self._evicted.append(victim.id)
        self._changed(ledger=False)

    def running_on(self, flavor: FlavorName) -> list[JobView]:
        """The jobs holding capacity in ``flavor`` that are not being evicted, in eviction
        order (``ordering.eviction_order``; until the books change). After evictions alone
        (no job admitted since) the list before, without the victims: a reclaim's books
        change once per victim, and at 16,384 nodes walking every holder again cost each
        following search ~3 ms."""
        return self.shared(("running on", flavor), lambda: self._running_on(flavor), booked=True)

    def _running_on(self, flavor: FlavorName) -> list[JobView]:
        known = self._running_lists.get(flavor)
        holders, evicted = len(self.holders), len(self._evicted)
        if known is not None and known[1] == holders:
            running, _, seen = known
            if seen != evicted:
                gone = set(self._evicted[seen:])
                running = [held for held in running if held.id not in gone]
        else:
            evicting = self.evicting
            running = [
                held
                for held in self._holders_in_eviction_order()
                if held.id not in evicting
                and held.allocation is not None
                and flavor in held.allocation.usage
            ]
        self._running_lists[flavor] = (running, holders, evicted)
        return running

    @cached_property
    def _by_eviction(self) -> tuple[list[JobView], list[tuple[int, float, str]], int]:
        """``holders`` in eviction order, their keys, and how many holders that counts: the
        last cycle's order brought up to date by the holders that came and went when it
        handed one on (the holders as the cycle began: ``prepared``'s views), else sorted."""
        known, prepared = self._carried.eviction, self._prepared
        if known is None or prepared is None or len(prepared.views) > len(self.holders):
            return _in_eviction_order(self.policy, self.holders)
        ordered, keys = _eviction_since(self.policy, known, prepared.views, prepared.view_ids)
        return ordered, keys, len(prepared.views)

    def _holders_in_eviction_order(self) -> list[JobView]:
        """``holders`` in eviction order, sorted once and brought up to date as jobs are
        admitted (holders only grow within a cycle, the admitted last)."""
        ordered, keys, counted = self._by_eviction
        if counted != len(self.holders):
            policy = self.policy
            for job in itertools.islice(self.holders.values(), counted, None):
                key = eviction_key(policy, job)
                at = bisect.bisect(keys, key)
                keys.insert(at, key)
                ordered.insert(at, job)
            self._by_eviction = (ordered, keys, len(self.holders))
        return ordered

    def lower_priority_running(
        self, team: TeamName, flavor: FlavorName, priority: int
    ) -> list[JobView]:
        """The team's ``running_on(flavor)`` of a lower priority than ``priority``, in eviction
        order (until the books change)."""
        policy = self.policy
        return self.shared(
            ("lower priority running", team, flavor, priority),
            lambda: [
                held
                for held in self.running_of_team_on(flavor).get(team, ())
                if priority_of(policy, held) < priority
            ],
            booked=True,
        )

    def running_of_team_on(self, flavor: FlavorName) -> dict[TeamName, list[JobView]]:
        """``running_on(flavor)`` by team, each in the same order (until the books change)."""

        def by_team() -> dict[TeamName, list[JobView]]:
            teams: dict[TeamName, list[JobView]] = {}
            for held in self.running_on(flavor):
                teams.setdefault(held.team, []).append(held)
            return teams

        return self.shared(("running by team on", flavor), by_team, booked=True)

    @cached_property
    def running_work(self) -> RunningWork:
        """The running jobs a wait may name (``quota_wait.RunningWork``): those that held an
        allocation as the cycle began, the same until it ends."""
        return RunningWork(self.holders.values())

    def running(self) -> list[JobView]:
        """The jobs holding capacity that are not being evicted."""
        return [h for h in self.holders.values() if h.id not in self.evicting]

    def ending(self) -> list[Ending]:
        """The running jobs that have a time limit, with the end it promises, earliest first
        (worked out again only when a job starts or is evicted, not when a hold is made)."""
        key = (len(self.holders), len(self.evicting))  # both only grow within a cycle
        if self._ending is None or self._ending[0] != key:
            self._ending = (key, endings(self.running(), self.policy, self.snapshot.now))
        return self._ending[1]

    # --- what is held ---------------------------------------------------------------------
    def hold_nodes(self, hold: NodeHold, team: TeamName) -> None:
        self._holds_made.append(hold)
        self.reserved.append(hold)
        self._holding_nodes.add(hold.job)
        self.reserving_teams.add(team)
        self._changed(booking=False)

    def hold_team_quota(self, hold: QuotaHold) -> None:
        self._holds_made.append(hold)
        self.team_holds[hold.team] = hold
        self._changed(booking=False)

    def _release_holds_of(self, job: JobView) -> None:
        """A job admitted needs its holds no longer (a starving job holds before the loop and
        may be admitted in its turn): jobs after it see the capacity, and failures remembered
        while the hold stood are forgotten."""
        kept = [hold for hold in self.reserved if hold.job != job.id]
        quota = self.team_holds.get(job.team)
        if quota is not None and quota.job == job.id:
            del self.team_holds[job.team]
        elif len(kept) == len(self.reserved):
            return
        self.reserved = kept
        self._holding_nodes = {hold.job for hold in kept}
        self._failed.clear()
        self._failed_tails.clear()
        self._changed(booking=False)

    def ledger_for(self, job: JobView) -> CapacityLedger:
        """The capacity left for ``job``: without the nodes held for other gangs, unless it
        may backfill into them (or runs within its guarantee and the gang would borrow)."""
        if not self.reserved:
            return self.ledger
        # within its guarantee, a job may use nodes held for a borrowing gang (else no matter)
        within = any(hold.borrowing for hold in self.reserved) and self.within_guarantee(job)
        holder = job.id if job.id in self._holding_nodes else None
        return self.shared(  # what binds depends on the job only through these three
            ("ledger for", holder, within, self.facts_of(job)[2]),
            lambda: self._ledger_without(
                tuple(
                    hold
                    for hold in self.reserved
                    if hold.job != job.id
                    and not (within and hold.borrowing)
                    and not self._backfills(job, hold.expected_start)
                )
            ),
        )

    def _ledger_without(self, binding: tuple[NodeHold, ...]) -> CapacityLedger:
        if not binding:
            return self.ledger
        key = ("ledger", *(id(hold) for hold in binding))
        return self.shared(key, lambda: confined_to_unheld(self.ledger, binding), on_ledger=True)

    def within_guarantee(self, job: JobView) -> bool:
        return self.shared(
            ("within", job.team, total_demand(job)),
            lambda: within_guarantee(self.book, job),
            booked=True,
        )

    def quota_holds_on(self, job: JobView) -> list[QuotaHold]:
        """The quota holds ``job`` must leave alone (it may backfill into the others)."""
        own = self.team_holds.get(job.team)
        holder = job.id if own is not None and own.job == job.id else None
        return self.shared(  # what binds depends on the job only through these three
            ("quota holds on", job.team, holder, self.facts_of(job)[2]),
            lambda: self._quota_holds_binding(job, own),
        )

    def _quota_holds_binding(self, job: JobView, own: QuotaHold | None) -> list[QuotaHold]:
        across = self.shared(
            "across", lambda: [h for h in self.team_holds.values() if h.across_teams]
        )
        candidates = [own, *(h for h in across if h is not own)] if own else across
        return [
            hold
            for hold in candidates
            if hold.binds(job) and not self._backfills(job, hold.expected_start)
        ]

    def book_for(self, job: JobView, holds: list[QuotaHold] | None = None) -> QuotaBook:
        """The books as ``job`` must see them: with the quota held from it taken (``holds``:
        ``quota_holds_on(job)`` when the caller has it)."""
        if holds is None:
            holds = self.quota_holds_on(job)
        if not holds:
            return self.book
        key = ("book", *map(id, holds))  # every hold is kept (``_holds_made``): ids stay theirs
        return self.shared(key, lambda: _with_holds(self.book, holds), booked=True)

    # --- trying a job -----------------------------------------------------------------------
    def attempts(
        self, job: JobView, book: QuotaBook, ledger: CapacityLedger | None = None
    ) -> list[Attempt]:
        """For each flavor the job may use, in order, until one admits: the quota check on
        ``book``, then placement on ``ledger`` (default: the capacity left for the job)."""
        if ledger is None:
            ledger = self.ledger_for(job)
        found = []
        for flavor, workload in self._workloads(job, book):
            attempt = self._attempt(job, flavor, book, ledger, workload)
            found.append(attempt)
            if attempt.allocation is not None:
                break
        return found

    def would_admit(
        self, job: JobView, book: QuotaBook, ledger: CapacityLedger | None = None
    ) -> bool:
        """Whether ``attempts`` would admit the job, without working out the allocation."""
        if ledger is None:
            ledger = self.ledger_for(job)
        demand = total_demand(job)
        for flavor, workload in self._workloads(job, book):
            if not self._check(book, job.team, flavor, demand).verdict.admissible:
                continue
            if self._placed(ledger, workload, job.previous_nodes)[0].admitted:
                return True
        return False

    def _workloads(
        self, job: JobView, book: QuotaBook
    ) -> Iterator[tuple[FlavorName, WorkloadSpec]]:
        """Each flavor the job may use, in the order tried, with its workload restricted to it."""
        workload = job.spec.workload
        key = (job.team, id(workload))  # the flavors depend on the team, not on the books
        known = self._in_flavors.get(key)
        if known is None:
            known = self._carried.in_flavors.get(key)  # the last cycle's, the same objects
            if known is not None and known[0] is workload:
                self._in_flavors[key] = known
        if known is None or known[0] is not workload:
            label = self.snapshot.flavor_label
            tried = [
                (flavor, in_flavor(workload, flavor, self._values, label))
                for flavor in flavors_for(job, book)
            ]
            known = self._in_flavors[key] = (workload, [(f, w) for f, w in tried if w])
        return iter(known[1])

    def _check(
        self, book: QuotaBook, team: TeamName, flavor: FlavorName, demand: Resources
    ) -> QuotaCheck:
        return self.shared_on(
            book,
            ("check", id(book), team, flavor, demand),
            lambda: book.check(team, flavor, demand),
        )

    def _attempt(
        self,
        job: JobView,
        flavor: FlavorName,
        book: QuotaBook,
        ledger: CapacityLedger,
        workload: WorkloadSpec,
    ) -> Attempt:
        demand = total_demand(job)
        check = self._check(book, job.team, flavor, demand)
        if not check.verdict.admissible:
            return Attempt(flavor, check, workload)
        result, after = self._placed(ledger, workload, job.previous_nodes)
        if not result.admitted:
            return Attempt(flavor, check, workload, result)
        allocation = allocation_of(book, job, flavor, demand, ledger, result, after)
        return Attempt(flavor, check, workload, result, allocation, after)

    # --- what was decided -------------------------------------------------------------------
    def decide_wait(self, diagnostic: Diagnostic) -> None:
        self.diagnostics.append(diagnostic)

    def parked_wait(self, job: JobView, identity: WaitIdentity) -> Diagnostic | None:
        """The job's diagnostic from the cycle before if it waited the same way then (the same
        reason about the same flavor): a wait's message, numbers and remedies are worked out
        again only when its reason changes (ADR 0007)."""
        before = self.previous.get(job.id)
        if before is None or before[0] != identity:
            return None
        return before[1]

    def line_up(self, ready: Sequence[JobView]) -> Lineup:
        """The ready jobs in their teams' queues, from the last cycle's where it left some;
        the jobs that hold something already (a starving job's holds) have their turns to
        come."""
        by_phase = self.snapshot.by_phase
        self.lineup = line_up(
            ready,
            self.order_of,
            guard_s=self.policy.starvation_guard_s,
            now=self.snapshot.now,
            before=self._carried.lineup,
            changes=by_phase.ready_changes
            if by_phase is not None and ready is by_phase.ready
            else None,
        )
        return self.lineup

    def carried(self, *, complete: bool = True) -> Carried:
        """What the cycle hands on (``complete``: every job had its turn)."""
        return Carried(
            self.waits,
            self.facts,
            self._prepared,
            self.lineup,
            self._settled,
            self._carried.class_numbers,
            self._parked_classes,
            self._in_flavors,
            self._shapes,
            self._carried.priorities,
            self._held_still(),
            self._books,
            self._eviction_after(),
            self._failed if complete and not self.stopping_for else None,
            self.guard_passes_after,
        )

    def _eviction_after(self) -> EvictionOrder | None:
        """The eviction order to hand on: this cycle's when it sorted one, else the one it was
        handed (still right for the views it names)."""
        known = self.__dict__.get("_by_eviction")
        if known is None:
            return self._carried.eviction
        ordered, keys, _ = known
        return EvictionOrder(tuple(ordered), tuple(keys), frozenset(map(id, ordered)))

    def _held_still(self) -> dict[int, HeldArrays]:
        """``TrialBudget.held`` of the allocations that still hold capacity after the cycle."""
        held = self.trial_budget.held
        if not held:
            return {}
        kept = {id(job.allocation) for job in self.holders.values()}
        return {key: arrays for key, arrays in held.items() if key in kept}

    def note_wait(self, job: JobId, identity: WaitIdentity, diagnostic: Diagnostic) -> None:
        self.waits[job] = (identity, diagnostic)

    # --- the order's jobs left -----------------------------------------------------------
    def start_order(self) -> None:
        """The order starts: the jobs that hold something already (a starving job's holds)
        have their turns to come."""
        self._holders_to_come = {hold.job for hold in self.reserved} | {
            hold.job for hold in self.team_holds.values()
        }

    def hand_out(self, job: JobView) -> None:
        """The job's turn comes now."""
        if self._holders_to_come:
            self._holders_to_come.discard(job.id)

    def settle_rest(self, team: TeamName, queued: Sequence[Queued], position: int) -> bool:
        """When every job a team has left in the order (``queued[position:]``) is of a class that
        failed, and no failure can be forgotten any more: each waits as its class failed, now,
        and True (the team leaves the order). Exactly what their turns would decide, in one
        pass: such a turn changes nothing but the job's own wait, and failures are forgotten
        only when a job that holds something is admitted, which only a job whose turn is still
        to come can be (holds are taken before the order starts, or by a job in its own turn,
        which fails). Not for a strict-fifo team, nor while victims stop for a preemptor (their
        turns are not of that kind)."""
        if not self._failures_stand(team):
            return False
        failures = len(self._failed)
        tail, seen, settled = self._failed_tails.get(team) or (
            len(queued),
            -1,
            self._settled_run(team, queued),
        )
        if seen != failures:  # a class failed since: the tail may reach further back
            failed = self._failed
            begins, ends = settled
            while tail > position:  # each job is looked at once while failures stand
                if tail == ends and begins < ends and self._settled_classes_failed(team):
                    tail = begins  # each of them would be looked at and found failed
                elif queued[tail - 1][0].alike in failed:
                    tail -= 1
                else:
                    break
            self._failed_tails[team] = (tail, failures, settled)
        if tail > position:
            return False
        self._wait_as_known_all(team, list(queued[position:]))
        return True

    def _settled_run(self, team: TeamName, queued: Sequence[Queued]) -> tuple[int, int]:
        """Where the team's jobs that settled last cycle (``SettledWaits.entries``) begin and
        end in its queue when they are there still, in a row (else an empty run at the end):
        jobs admitted since come off before them, jobs that arrived since after them. The
        queue is in order, so the first of them is found by halving."""
        known = self._carried.settled.get(team)
        nowhere = (len(queued), len(queued))
        if known is None or not known.entries:
            return nowhere
        entries = known.entries
        begins = bisect.bisect_left(queued, entries[0])
        ends = begins + len(entries)
        if ends > len(queued) or queued[begins] is not entries[0]:
            return nowhere
        return (begins, ends) if queued[begins:ends] == entries else nowhere

    def _settled_classes_failed(self, team: TeamName) -> bool:
        """Whether every class the team's jobs settled with last cycle has failed now."""
        failed = self._failed
        return all(job_class in failed for job_class in self._carried.settled[team].failures)

    def _failures_stand(self, team: TeamName) -> bool:
        """Whether the team's jobs whose classes failed may wait as they did now, whenever
        their turns come: no failure can be forgotten any more (failures are forgotten only
        when a job that holds something is admitted, and only one whose turn is still to come
        can be), the team does not queue strict-fifo, and no victim stops for a preemptor."""
        return not (self._holders_to_come or team in self.strict_teams or self.stopping_for)

    def passer(self, team: TeamName) -> Passes | None:
        """The team's jobs whose classes failed, while their failures stand
        (``_failures_stand``), are passed over in the order: each waits as its class failed,
        now (``wait_alike``) — exactly what its turn would decide whenever it comes
        (``ordering.Passes``)."""
        if not self._failures_stand(team):
            return None
        failed, wait_alike = self._failed, self.wait_alike
        previous, waits, said = self.previous, self.waits, self.diagnostics.append

        def passes(queued: Sequence[Queued], position: int) -> int:
            at, end = position, len(queued)
            while at < end:
                facts, job = queued[at]
                known = failed.get(facts.alike)
                if known is None:
                    break
                identity = known[1]
                if identity is None:
                    wait_alike(job, known)
                else:
                    job_id = job.id  # wait_alike, written out: most waiting jobs pass here
                    before = previous.get(job_id)
                    if before is None or before[0] != identity:
                        before = (identity, alike(known[0], job))
                    waits[job_id] = before
                    said(before[1])
                at += 1
            return at - position

        return passes

    def _wait_as_known_all(self, team: TeamName, rest: list[Queued]) -> None:
        """``waits_as_known`` for each of ``rest`` (a team's jobs left, all of classes that
        failed: their facts name the class), written out for the many a settled team may have:
        the run of them that settled alike last cycle waits as it did then (``SettledWaits``),
        taken whole but for the jobs of classes whose wait's identity moved since, which are
        worked out again; each of the others is looked at."""
        known = self._carried.settled.get(team)
        start, reused, moved = (
            self._settled_alike(known, rest) if known is not None else (0, 0, frozenset())
        )
        ids, parked, said = [], [], []
        failed, previous = self._failed, self.previous
        waited = True  # whether every wait has an identity (the next cycle may take them)
        for facts, job in rest[reused:]:
            job_id = job.id
            diagnostic, identity = failed[facts.alike]  # the job's class
            if identity is None:
                said.append(alike(diagnostic, job))
                waited = False
                continue
            before = previous.get(job_id)
            if before is None or before[0] != identity:
                before = (identity, alike(diagnostic, job))
            ids.append(job_id)
            parked.append(before)
            said.append(before[1])
        if reused and known is not None:
            end = start + reused
            taken, taken_said = known.parked[start:end], known.said[start:end]
            if moved:
                _wait_anew(failed, rest, moved, taken, taken_said)
            ids, parked = known.ids[start:end] + ids, taken + parked
            said = taken_said + said
        self.waits.update(zip(ids, parked, strict=True))
        self.diagnostics.extend(said)
        if waited:
            classes = {facts.alike for facts, _ in rest[reused:]}
            if reused and known is not None:
                classes.update(known.failures)  # those of the jobs taken whole, and maybe more
            failures = {
                job_class: identity
                for job_class in classes
                if (identity := failed[job_class][1]) is not None
            }
            self._settled[team] = SettledWaits(rest, ids, parked, said, failures)

    def _settled_alike(
        self, known: SettledWaits, rest: list[Queued]
    ) -> tuple[int, int, frozenset[int]]:
        """Where in ``known`` the first jobs of ``rest`` are, how many of them in a row, and
        the classes whose wait's identity moved since, when every class of ``known`` failed
        now with an identity (else none)."""
        failed = self._failed
        moved = set()
        for job_class, identity in known.failures.items():
            now = failed.get(job_class)
            if now is None or now[1] is None:
                return 0, 0, frozenset()
            if now[1] != identity:
                moved.add(job_class)
        first = rest[0]
        entries = known.entries
        start = next(
            (at for at in range(min(len(entries), REUSED_FROM_WITHIN)) if entries[at] is first),
            None,
        )
        if start is None:
            return 0, 0, frozenset()
        low, high = 1, min(len(rest), len(entries) - start)  # rest[:low] matches
        if rest[:high] == entries[start : start + high]:  # the usual: all of them
            return start, high, frozenset(moved)
        while low < high - 1:  # the longest run alike, halving
            middle = (low + high) // 2
            if rest[:middle] == entries[start : start + middle]:
                low = middle
            else:
                high = middle
        return start, low, frozenset(moved)

    def known_failure(self, job_class: int) -> Failure | None:
        """How the first job of the class failed this cycle, and its wait's identity (None:
        a wait that is worked out afresh every cycle)."""
        return self._failed.get(job_class)

    def waits_as_known(self, job: JobView, job_class: int | None = None) -> bool:
        """When a job of the same class failed before it this cycle: the job waits alike —
        with the diagnostic it had if it waited so last cycle too, else that job's, named for
        it — and True. The fast path of ``admitting.consider`` for most waiting jobs."""
        if job_class is None:
            job_class = self.class_number(job)
        known = self._failed.get(job_class)
        if known is None:
            return False
        self.wait_alike(job, known)
        return True

    def wait_alike(self, job: JobView, known: Failure) -> Failure:
        """The job waits as ``known`` (the first job of its class, or one held back alike):
        with the diagnostic it had if it waited so last cycle too (``parked_wait``), else that
        one's, named for it. Written out: most waiting jobs of a cycle come this way."""
        diagnostic, identity = known
        if identity is None:
            said = alike(diagnostic, job)
            self.diagnostics.append(said)
            return said, identity
        job_id = job.id
        before = self.previous.get(job_id)
        if before is None or before[0] != identity:
            before = (identity, alike(diagnostic, job))
        self.waits[job_id] = before
        self.diagnostics.append(before[1])
        return before[1], identity

    def remember_failure(
        self, job_class: int, diagnostic: Diagnostic, identity: WaitIdentity | None
    ) -> None:
        self._failed[job_class] = (diagnostic, identity)

    def held_back_at_every_priority(self, job: JobView, failure: Failure) -> None:
        """The job failed held back by its own team's quota hold: so does every class of its
        team, shape and time limit, whatever its priority, for the rest of the cycle (until a
        hold is let go, as any failure). Priority does not enter such a job's answer — the
        hold binds every later job of the team alike, and a job it binds neither places nor
        evicts — and capacity and quota only get used up within a cycle, so a later job of the
        same team and shape is held back too. Not the classes of jobs that hold something and
        whose turns are still to come (they may use what is held for them), nor for a team
        that queues strict-fifo."""
        if job.team in self.strict_teams or not self.held_back_across_priorities:
            return
        team, _, shape, limit = self.facts_of(job)[1]
        numbers = self._carried.priorities.get((team, shape, limit), ())
        if len(numbers) < 2:
            return
        facts = self.facts
        to_come = {facts[held][3].alike for held in self._holders_to_come if held in facts}
        failed = self._failed
        for number in numbers:
            if number not in failed and number not in to_come:
                failed[number] = failure

    def held_back_alike(
        self, job: JobView, holds: list[QuotaHold], capacity: CapacityLedger
    ) -> HeldBack:
        """How a job of the same team, shape and time limit was held back by the same quota
        ``holds`` on the same ``capacity`` (``ledger_for``) since the books last changed, if
        one was: priority does not enter a held-back job's answer (it neither places nor
        evicts). What to ``share_held_back`` otherwise: nothing for a job something is held
        for."""
        if self.holds_anything_for(job):
            return HeldBack(None, None)
        team, _, shape, limit = self.facts_of(job)[1]
        # the holds by identity (every hold is kept, ``_holds_made``, so an id stays its own;
        # two holds alike are never made in a cycle), which names their expected starts too
        key = ("held-back", team, shape, limit, job.previous_nodes, *map(id, holds), id(capacity))
        found = self._booked_answer(key)
        return HeldBack((key, capacity), found)  # type: ignore[arg-type]

    def park_class(self, job: JobView, tried: list[Attempt], identity: WaitIdentity) -> None:
        """Keep, for the cycles after, what the wait of a job held back by its team's quota
        hold followed from when that is its team's own figures alone: every check ``tried``
        (on the books without the holds; those with them only add to what is used) answered
        from them, and no placement was tried."""
        if not all(a.quota.team_only and a.placement is None for a in tried):
            return
        flavors = [flavor for flavor, _ in self._workloads(job, self.book)]
        self._parked_classes[self.class_number(job)] = ParkedClass(
            self.book.team_figures(job.team, flavors), identity
        )

    def parked_failure(
        self, job: JobView, holds: list[QuotaHold], number: int | None = None
    ) -> Failure | None:
        """How a job that ``holds`` bind waits when its class was parked on figures that stand
        (a hold of its team binds it, and the team uses what it used): as it waited then —
        its first try would be held back, check the same quota with the same answers and try
        nothing else — and None otherwise, or when the job did not wait so itself (its wait
        is diagnosed afresh). ``number``: the job's class number, when the caller has it."""
        if number is None:
            number = self.class_number(job)
        parked = self._carried.parked_classes.get(number)
        if parked is None:
            return None
        before = self.previous.get(job.id)
        if before is None or before[0] != parked.identity:
            return None
        if not any(hold.team == job.team for hold in holds):
            return None  # not held back by its team: it may preempt, or hold quota itself
        flavors = [flavor for flavor, _ in self._workloads(job, self.book)]
        if parked.figures != self.book.team_figures(job.team, flavors):
            return None
        self._parked_classes[number] = parked
        self.note_wait(job.id, parked.identity, before[1])
        self.decide_wait(before[1])
        return before[1], parked.identity

    def share_held_back(self, held_back: HeldBack, failure: Failure) -> None:
        if held_back.key is not None:
            key, capacity = held_back.key
            self.shared_on(capacity, key, lambda: failure)

    def holds_anything_for(self, job: JobView) -> bool:
        quota = self.team_holds.get(job.team)
        if quota is not None and quota.job == job.id:
            return True
        return job.id in self._holding_nodes

    def fits(self, ledger: CapacityLedger, attempt: Attempt) -> bool:
        """Whether the attempt's workload places on ``ledger`` (shared in the epoch)."""
        return self._placed(ledger, attempt.workload, frozenset())[0].admitted

    def _placed(
        self, ledger: CapacityLedger, workload: WorkloadSpec, previous_nodes: frozenset[str]
    ) -> tuple[PlacementResult, CapacityLedger]:
        place = self._place
        return self.shared_on(
            ledger,
            ("place", id(ledger), self.shape_of(workload), previous_nodes),
            lambda: place(ledger, workload, previous_nodes),
            on_ledger=True,
        )


def _wait_anew(
    failed: Mapping[int, Failure],
    rest: Sequence[Queued],
    moved: frozenset[int],
    parked: list[ParkedWait],
    said: list[Diagnostic],
) -> None:
    """In ``parked`` and ``said`` (the waits of ``rest``'s first jobs as they were taken from
    the last cycle), the jobs of the ``moved`` classes wait as their class failed now: named
    for them, under the class's wait's new identity (as ``_wait_as_known_all`` would write a
    job whose wait's identity moved)."""
    for position in [at for at in range(len(parked)) if rest[at][0].alike in moved]:
        facts, job = rest[position]
        diagnostic, identity = failed[facts.alike]
        assert identity is not None  # _settled_alike took none without
        parked[position] = (identity, alike(diagnostic, job))
        said[position] = parked[position][1]


def _in_eviction_order(
    policy: ClusterPolicy, holders: Mapping[JobId, JobView]
) -> tuple[list[JobView], list[tuple[int, float, str]], int]:
    """``holders`` in eviction order, their keys, and how many they are."""
    keyed = sorted((eviction_key(policy, job), job) for job in holders.values())  # no ties
    return [job for _, job in keyed], [key for key, _ in keyed], len(holders)


def _eviction_since(
    policy: ClusterPolicy,
    known: EvictionOrder,
    views: tuple[JobView, ...],
    view_ids: frozenset[int],
) -> tuple[list[JobView], list[tuple[int, float, str]]]:
    """``views`` in eviction order, from ``known`` (an order of earlier views on the same
    policy): the views gone are left out, the new ones put in their places by their keys."""
    ordered, keys = list(known.jobs), list(known.keys)
    gone = known.ids - view_ids
    if gone:
        kept = [id(job) not in gone for job in ordered]
        ordered, keys = (
            list(itertools.compress(ordered, kept)),
            list(itertools.compress(keys, kept)),
        )
    new = view_ids - known.ids
    if new:
        for job in itertools.compress(views, [id(view) in new for view in views]):
            key = eviction_key(policy, job)
            at = bisect.bisect(keys, key)
            keys.insert(at, key)
            ordered.insert(at, job)
    return ordered, keys


def _with_holds(book: QuotaBook, holds: list[QuotaHold]) -> QuotaBook:
    for hold in holds:
        book = hold.applied_to(book)
    return book
