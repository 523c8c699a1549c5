"""Quota accounting for one cycle: guarantees, borrowing within limits, lending, idle capacity.

Per flavor and per *covered* resource (one that some team's guarantee names for the flavor;
others are limited by physical capacity alone):

- a team's **borrowed** amount is its usage above its guarantee;
- a team **lends** its unused guarantee (up to its lending limit) unless it is DontLend;
- teams share along their **cohort tree** (:mod:`topoq.core.cohort_tree`): borrowing is served
  inside the team's own cohort first, then by each cohort above it, each within its borrowing
  and lending limits; **idle** capacity — what no team or cohort is guaranteed — is borrowable
  by every top-level cohort when idle resource sharing is on;
- the books balance when no cohort needs more than its borrowing limit lets in and idle
  capacity serves what the top-level cohorts need.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from topoq.core.cohort_tree import (
    CohortTree,
    Flow,
    PathFlow,
    closest_common,
    drawn_from,
    flow_after,
    flow_of,
    flow_updated,
    levels,
)
from topoq.domain.governance import (
    ClusterPolicy,
    CohortPath,
    FlavorName,
    IdleAllocation,
    TeamName,
    TeamSpec,
)
from topoq.domain.lint import accelerators_first, readable_amount
from topoq.domain.resources import Resources


class QuotaVerdict(StrEnum):
    WITHIN_GUARANTEE = "within_guarantee"
    BORROWING = "borrowing"
    NO_QUOTA = "no_quota"
    """The team may not borrow and its guarantee has no room (or there is no guarantee)."""
    BORROW_LIMIT = "borrow_limit"
    NO_LENDER = "no_lender"
    UNKNOWN_TEAM = "unknown_team"

    @property
    def admissible(self) -> bool:
        return self in (QuotaVerdict.WITHIN_GUARANTEE, QuotaVerdict.BORROWING)


@dataclass(frozen=True)
class QuotaCheck:
    verdict: QuotaVerdict
    message: str
    numbers: Mapping[str, int | str] = field(default_factory=dict)


def positive(resources: Resources) -> Resources:
    return Resources({name: value for name, value in resources.items() if value > 0})


def at_most(left: Resources, right: Resources) -> Resources:
    names = set(left) | set(right)
    return Resources({name: min(left.amount(name), right.amount(name)) for name in names})


class QuotaBook:
    """Usage per team and flavor, with the policy and the cluster's capacity per flavor.

    Mutable within a cycle; ``copy()`` before a trial."""

    def __init__(
        self,
        policy: ClusterPolicy,
        capacity: Mapping[FlavorName, Resources],
        usage: Mapping[TeamName, Mapping[FlavorName, Resources]] | None = None,
        *,
        tree: CohortTree | None = None,
    ) -> None:
        self.policy = policy
        self.capacity = dict(capacity)
        self.usage: dict[TeamName, dict[FlavorName, Resources]] = {
            team: dict(flavors) for team, flavors in (usage or {}).items()
        }
        self.changes: dict[TeamName, int] = {}
        """How often what each team's standing depends on changed in this book — its own usage
        or, under fair share, the share of a cohort on its path (for callers that cache)."""
        self.tree = tree if tree is not None else CohortTree.of(policy)
        self._covered = {flavor: self._covered_names(flavor) for flavor in self.capacity}
        self._cohort_used: dict[CohortPath, dict[FlavorName, Resources]] = {}
        for team, flavors in self.usage.items():
            for flavor, amount in flavors.items():
                self._add_to_cohorts(team, flavor, self.covered(flavor, amount))
        self._flows: dict[FlavorName, Flow] = {}
        self._shares: dict[CohortPath, float] = {}
        self._drawn: dict[FlavorName, dict[TeamName, Resources]] = {}
        self.memo: dict[Hashable, object] = {}
        """Answers derived from the books as they stand (a waiting job's quota remedies), for
        callers that ask again; cleared by every change."""

    def copy(self) -> QuotaBook:
        """The same books for a trial: the figures copied (not recounted from every team's
        usage, as a new book would), the caches kept — each one is replaced, never changed in
        place, and a change to the copy clears the copy's own. ``changes`` starts afresh."""
        twin = QuotaBook.__new__(QuotaBook)
        twin.policy, twin.tree = self.policy, self.tree
        twin.capacity = self.capacity
        twin.usage = {team: dict(flavors) for team, flavors in self.usage.items()}
        twin.changes = {}
        twin._covered = self._covered
        twin._cohort_used = {path: dict(flavors) for path, flavors in self._cohort_used.items()}
        twin._flows = dict(self._flows)
        twin._shares = dict(self._shares)
        twin._drawn = dict(self._drawn)
        twin.memo = {}
        return twin

    def _covered_names(self, flavor: FlavorName) -> frozenset[str]:
        names: set[str] = set()
        for team in self.policy.teams:
            quota = team.quota_for(flavor)
            if quota is not None:
                names.update(quota.covers)
        for cohort in self.policy.cohorts:
            cohort_quota = cohort.quota_for(flavor)
            if cohort_quota is not None:
                names.update(cohort_quota.covers)
        return frozenset(names)

    def _add_to_cohorts(self, team: TeamName, flavor: FlavorName, delta: Resources) -> None:
        spec = self.policy.by_team.get(team)
        if spec is None or not delta:
            return
        for level in levels(spec.cohort):
            flavors = self._cohort_used.setdefault(level, {})
            flavors[flavor] = flavors.get(flavor, Resources()) + delta

    def covered(self, flavor: FlavorName, resources: Resources) -> Resources:
        """Only the resources quotas speak about for this flavor."""
        names = self._covered.get(flavor, frozenset())
        return Resources({name: value for name, value in resources.items() if name in names})

    # --- per-team figures -------------------------------------------------------------
    def used(self, team: TeamName, flavor: FlavorName) -> Resources:
        return self.usage.get(team, {}).get(flavor, Resources())

    def guarantee(self, team: TeamName, flavor: FlavorName) -> Resources:
        spec = self.policy.by_team.get(team)
        quota = spec.quota_for(flavor) if spec is not None else None
        return quota.guarantee if quota is not None else Resources()

    def borrowed(self, team: TeamName, flavor: FlavorName) -> Resources:
        used = self.covered(flavor, self.used(team, flavor))
        return positive(used - self.guarantee(team, flavor))

    def lendable(self, team: TeamName, flavor: FlavorName) -> Resources:
        return self._lendable_with(team, flavor, self.covered(flavor, self.used(team, flavor)))

    def _lendable_with(self, team: TeamName, flavor: FlavorName, used: Resources) -> Resources:
        spec = self.policy.by_team.get(team)
        if spec is None or not spec.sharing.lends or not spec.active:
            return Resources()
        quota = spec.quota_for(flavor)
        if quota is None:
            return Resources()
        unused = positive(quota.guarantee - used)
        return unused if quota.lending_limit is None else at_most(unused, quota.lending_limit)

    def idle(self, flavor: FlavorName) -> Resources:
        """Capacity of the flavor no team is guaranteed (borrowable when sharing is on)."""
        if not self.policy.idle_resource_sharing:
            return Resources()
        # an inactive team's quota is not in force: its share is idle
        guaranteed = _total(
            self.tree.guaranteed.get(top, {}).get(flavor, Resources())
            for top in self.tree.order
            if len(top) <= 1
        )
        return positive(self.covered(flavor, self.capacity.get(flavor, Resources())) - guaranteed)

    def lent(self, team: TeamName, flavor: FlavorName) -> Resources:
        """The part of the team's unused guarantee that borrowers use now. Borrowers draw on
        their own cohort first (its own guarantee, then its members' offers in proportion to
        what each lends), then on the cohorts above; idle capacity last."""
        if team not in self.policy.by_team:
            return Resources()
        drawn = self._drawn.get(flavor)
        if drawn is None:
            drawn = self._drawn[flavor] = drawn_from(
                self.tree, self.flow(flavor), self._own(flavor)
            )
        return drawn.get(team, Resources())

    # --- cohorts --------------------------------------------------------------------
    def _own(self, flavor: FlavorName) -> _OwnGuarantee:
        return _OwnGuarantee(self, flavor)

    def cohort_used(self, path: CohortPath, flavor: FlavorName) -> Resources:
        """The covered usage of every team under the cohort."""
        return self._cohort_used.get(path, {}).get(flavor, Resources())

    def cohort_borrowed(self, path: CohortPath, flavor: FlavorName) -> Resources:
        """What the cohort's subtree uses above its subtree's guarantee."""
        guaranteed = self.tree.guaranteed.get(path, {}).get(flavor, Resources())
        return positive(self.cohort_used(path, flavor) - guaranteed)

    def flow(self, flavor: FlavorName) -> Flow:
        """How the flavor's borrowing is served through the cohort tree now (cached until the
        books change)."""
        known = self._flows.get(flavor)
        if known is None:
            known = flow_of(
                self.tree,
                flavor,
                need_of=lambda team: self.borrowed(team, flavor),
                offer_of=lambda team: self.lendable(team, flavor),
                own=self._own(flavor),
                idle=self.idle(flavor),
            )
            self._flows[flavor] = known
        return known

    def _flow_after(self, team: TeamSpec, flavor: FlavorName, demand: Resources) -> PathFlow:
        """The cohorts on the team's path once it takes ``demand`` more."""
        used = self.covered(flavor, self.used(team.name, flavor)) + demand
        return flow_after(
            self.tree,
            self.flow(flavor),
            flavor,
            team.name,
            team.cohort,
            need=positive(used - self.guarantee(team.name, flavor)),
            offer=self._lendable_with(team.name, flavor, used),
        )

    def cohort_share(self, path: CohortPath) -> float:
        """The cohort's weighted share: the largest fraction of any covered resource of any
        flavor its subtree uses above its subtree's guarantee, over its fair-share weight."""
        known = self._shares.get(path)
        if known is None:
            largest = _largest_fraction(self, lambda flavor: self.cohort_borrowed(path, flavor))
            known = self._shares[path] = _weighted(largest, self.tree.weight(path))
        return known

    def reclaimable(
        self, claimant: TeamName, holder: TeamName, flavor: FlavorName, demand: Resources
    ) -> bool:
        """Whether ``holder``'s work runs on capacity ``claimant``'s side of the tree lent and
        wants back for ``demand``. Below the closest cohort the two share (the cluster when
        none), the holder's branch must take from outside itself and the claimant's branch,
        with ``demand``, stay within its own guarantee; and the holder must borrow."""
        mine, theirs = self.policy.by_team.get(claimant), self.policy.by_team.get(holder)
        if mine is None or theirs is None or not self.borrowed(holder, flavor):
            return False
        if not mine.cohort and not theirs.cohort:
            return True  # both in the unnamed cohort: the holder is the branch
        shared = closest_common(mine.cohort, theirs.cohort)
        if not mine.cohort or shared < len(mine.cohort):  # the claimant's branch is a cohort
            branch = mine.cohort[: shared + 1]  # () for the unnamed cohort
            if not self._within_subtree(branch, flavor, demand):
                return False  # that branch borrows itself: it lent nothing to take back
        elif not self._within_own_guarantee(mine, flavor, demand):
            return False  # the claimant's branch is the claimant, borrowing itself
        if theirs.cohort and shared >= len(theirs.cohort):
            return True  # the holder is a member of the cohort they share
        branch = theirs.cohort[: shared + 1]  # () for a holder in the unnamed cohort
        return bool(self.flow(flavor).need.get(branch))

    def _within_subtree(self, path: CohortPath, flavor: FlavorName, demand: Resources) -> bool:
        guaranteed = self.tree.guaranteed.get(path, {}).get(flavor, Resources())
        return (self.cohort_used(path, flavor) + self.covered(flavor, demand)).fits_in(guaranteed)

    def within_cohort_guarantee(
        self, team: TeamName, flavor: FlavorName, demand: Resources
    ) -> bool:
        """Whether ``demand`` keeps some cohort on the team's path that has a guarantee of its
        own for the flavor within its subtree's guarantee: the team borrows, but what it
        borrows is its cohort's, which the cohort's teams may reclaim like a team's own."""
        spec = self.policy.by_team.get(team)
        if spec is None or not spec.active:
            return False
        return any(
            (own := self.tree.quota(level, flavor)) is not None
            and bool(own.guarantee)
            and self._within_subtree(level, flavor, demand)
            for level in levels(spec.cohort)
        )

    def closeness(self, claimant: TeamName, holder: TeamName) -> int:
        """How many cohorts two teams share from the top (more is closer)."""
        mine, theirs = self.policy.by_team.get(claimant), self.policy.by_team.get(holder)
        if mine is None or theirs is None:
            return -1
        return closest_common(mine.cohort, theirs.cohort)

    # --- books ----------------------------------------------------------------------
    def charge(self, team: TeamName, flavor: FlavorName, amount: Resources) -> None:
        flavors = self.usage.setdefault(team, {})
        self._set(team, flavor, flavors.get(flavor, Resources()) + amount)

    def release(self, team: TeamName, flavor: FlavorName, amount: Resources) -> None:
        flavors = self.usage.setdefault(team, {})
        self._set(team, flavor, positive(flavors.get(flavor, Resources()) - amount))

    def _set(self, team: TeamName, flavor: FlavorName, amount: Resources) -> None:
        spec = self.policy.by_team.get(team)
        path = levels(spec.cohort) if spec is not None else []
        fair = self.policy.idle_allocation is IdleAllocation.FAIR_SHARE
        shares = [self.cohort_share(level) for level in path] if fair else []
        before = self.covered(flavor, self.used(team, flavor))
        self.usage.setdefault(team, {})[flavor] = amount
        self._add_to_cohorts(team, flavor, self.covered(flavor, amount) - before)
        known = self._flows.pop(flavor, None)
        if known is not None and spec is not None and team in known.team_need:
            # only this team's figures moved: settle its path again, not the whole tree
            self._flows[flavor] = flow_updated(
                self.tree,
                known,
                flavor,
                team,
                spec.cohort,
                need=self.borrowed(team, flavor),
                offer=self.lendable(team, flavor),
            )
        self._drawn.pop(flavor, None)
        self.memo.clear()
        for level in path:
            self._shares.pop(level, None)
        self._count_change(team, path, shares)

    def _count_change(self, team: TeamName, path: list[CohortPath], shares: list[float]) -> None:
        """The team's standing changed; under fair share so did that of every team below the
        highest cohort on its path whose share moved (the cohort shares lead their positions)."""
        self.changes[team] = self.changes.get(team, 0) + 1
        for level, share in zip(path, shares, strict=False):
            if self.cohort_share(level) != share:
                for member in self.tree.members.get(level, ()):
                    if member != team:
                        self.changes[member] = self.changes.get(member, 0) + 1
                return

    def shortfall(self, flavor: FlavorName) -> Resources:
        """How much borrowing exceeds what lenders and idle capacity can back, or what cohorts'
        borrowing limits let in (zero when the books balance)."""
        return self.flow(flavor).shortfall

    def within_guarantee(self, team: TeamName, flavor: FlavorName, demand: Resources) -> bool:
        """Whether taking ``demand`` keeps the team inside its guarantee, or inside that of a
        cohort on its path with a guarantee of its own (which is its teams' as a team's is the
        team's: served before anyone borrows, and reclaimed)."""
        spec = self.policy.by_team.get(team)
        if spec is None or not spec.active:
            return False
        return self._within_own_guarantee(spec, flavor, demand) or self.within_cohort_guarantee(
            team, flavor, demand
        )

    def _within_own_guarantee(self, spec: TeamSpec, flavor: FlavorName, demand: Resources) -> bool:
        after = self.covered(flavor, self.used(spec.name, flavor) + demand)
        return after.fits_in(self.guarantee(spec.name, flavor))

    def check(self, team: TeamName, flavor: FlavorName, demand: Resources) -> QuotaCheck:
        """Whether ``team`` may take ``demand`` more of ``flavor`` now."""
        spec = self.policy.by_team.get(team)
        if spec is None or not spec.active:
            state = "unknown" if spec is None else "inactive"
            return QuotaCheck(QuotaVerdict.UNKNOWN_TEAM, f"team {team!r} is {state}")
        demand = self.covered(flavor, demand)
        after = self.covered(flavor, self.used(team, flavor)) + demand
        guarantee = self.guarantee(team, flavor)
        if after.fits_in(guarantee):
            return self._balanced(team, flavor, demand, QuotaVerdict.WITHIN_GUARANTEE)
        return self._borrowing(spec, flavor, demand, after - guarantee)

    def _borrowing(
        self, spec: TeamSpec, flavor: FlavorName, demand: Resources, over: Resources
    ) -> QuotaCheck:
        over = positive(over)
        quota = spec.quota_for(flavor)
        if not spec.sharing.borrows:
            return QuotaCheck(
                QuotaVerdict.NO_QUOTA,
                f"team {spec.name} {self.describe(spec.name, flavor)}; it needs {_fmt(over)} "
                f"more and may not borrow ({spec.sharing.value})",
                self._numbers(spec.name, flavor, demand),
            )
        limit = quota.borrow_limit if quota is not None else Resources()
        if not over.fits_in(limit):
            return QuotaCheck(
                QuotaVerdict.BORROW_LIMIT,
                f"team {spec.name} {self.describe(spec.name, flavor)}; it would borrow "
                f"{_fmt(over)}, over its borrow limit of {_fmt(limit) or 'nothing'}",
                self._numbers(spec.name, flavor, demand),
            )
        return self._balanced(spec.name, flavor, demand, QuotaVerdict.BORROWING)

    def _balanced(
        self, team: TeamName, flavor: FlavorName, demand: Resources, verdict: QuotaVerdict
    ) -> QuotaCheck:
        """The verdict unless taking ``demand`` would make the books worse: a cohort on the
        team's path over its borrowing limit (even for work within the team's guarantee: the
        lender takes back what its cohort's members borrowed, so they must be reclaimed), or,
        for borrowing, more than lenders and idle capacity can serve."""
        spec = self.policy.by_team[team]
        before, after = self.flow(flavor), self._flow_after(spec, flavor, demand)
        for level in reversed(levels(spec.cohort)):
            grown = positive(after.over_limit[level] - before.over_limit[level])
            if grown:
                return self._cohort_limit(team, flavor, demand, level, after)
        missing = positive(after.unserved - before.unserved)
        if missing and verdict is QuotaVerdict.BORROWING:
            return QuotaCheck(
                QuotaVerdict.NO_LENDER,
                f"team {team} {self.describe(team, flavor)}; it needs {_fmt(demand)} and no "
                f"lender has room for {_fmt(missing)} of it",
                self._numbers(team, flavor, demand) | {"missing": _fmt(missing)},
            )
        message = f"team {team} {self.describe(team, flavor)}"
        return QuotaCheck(verdict, message, self._numbers(team, flavor, demand))

    def _cohort_limit(
        self,
        team: TeamName,
        flavor: FlavorName,
        demand: Resources,
        path: CohortPath,
        after: PathFlow,
    ) -> QuotaCheck:
        quota = self.tree.quota(path, flavor)
        limit = quota.borrow_limit if quota is not None else Resources()
        wanted = after.need[path] + after.over_limit[path]
        name = "/".join(path)
        return QuotaCheck(
            QuotaVerdict.BORROW_LIMIT,
            f"team {team} {self.describe(team, flavor)}; cohort {name} would take "
            f"{_fmt(wanted)} from outside it, over its borrow limit of {_fmt(limit) or 'nothing'}",
            self._numbers(team, flavor, demand) | {"cohort": name},
        )

    def describe(self, team: TeamName, flavor: FlavorName) -> str:
        """``uses 64/64 nvidia.com/gpu of its p5.48xlarge guarantee and 32/32 borrowed``."""
        used = self.covered(flavor, self.used(team, flavor))
        guarantee = self.guarantee(team, flavor)
        name = _headline(guarantee or used)
        inside = min(used.amount(name), guarantee.amount(name))
        text = f"uses {inside}/{guarantee.amount(name)} {name} of its {flavor} guarantee"
        spec = self.policy.by_team.get(team)
        quota = spec.quota_for(flavor) if spec is not None else None
        if spec is not None and spec.sharing.borrows:
            limit = quota.borrow_limit.amount(name) if quota is not None else 0
            text += f" and {self.borrowed(team, flavor).amount(name)}/{limit} borrowed"
        return text

    def _numbers(
        self, team: TeamName, flavor: FlavorName, demand: Resources
    ) -> dict[str, int | str]:
        name = _headline(self.guarantee(team, flavor) or demand)
        return {
            "flavor": str(flavor),
            "resource": name,
            "requested": demand.amount(name),
            "used": self.covered(flavor, self.used(team, flavor)).amount(name),
            "guarantee": self.guarantee(team, flavor).amount(name),
            "borrowed": self.borrowed(team, flavor).amount(name),
        }


@dataclass(frozen=True)
class _OwnGuarantee:
    """A cohort's own covered guarantee of one flavor."""

    book: QuotaBook
    flavor: FlavorName

    def __call__(self, path: CohortPath) -> Resources:
        quota = self.book.tree.quota(path, self.flavor)
        return self.book.covered(self.flavor, quota.guarantee) if quota is not None else Resources()


def _total(amounts: Iterable[Resources]) -> Resources:
    total = Resources()
    for amount in amounts:
        total = total + amount
    return total


_HEADLINE_ORDER = ("nvidia.com/gpu", "aws.amazon.com/neurondevice", "cpu", "memory")


def _headline(resources: Resources) -> str:
    """The resource a message leads with: accelerators first."""
    for name in _HEADLINE_ORDER:
        if name in resources:
            return name
    return next(iter(resources), "nvidia.com/gpu")


def _fmt(resources: Resources) -> str:
    """``16 nvidia.com/gpu, 180 cpu, 1890.3Gi memory``: accelerators first, readable units."""
    return ", ".join(
        readable_amount(name, resources.amount(name)) for name in accelerators_first(resources)
    )


def dominant_share(book: QuotaBook, team: TeamName) -> float:
    """The team's largest borrowed fraction of any covered resource of any flavor, divided by
    its fair-share weight (a team that borrows nothing has share 0; weight 0 sorts last)."""
    spec = book.policy.by_team.get(team)
    largest = _largest_fraction(book, lambda flavor: book.borrowed(team, flavor))
    return _weighted(largest, spec.fair_share_weight if spec is not None else 0)


def cohort_shares(book: QuotaBook, team: TeamName) -> tuple[float, ...]:
    """Where the team's cohorts stand under fair share, level by level from the top: the
    weighted share of each cohort on its path (what its subtree uses above its subtree's
    guarantee, as :func:`dominant_share` measures a team). The ordering puts the team's own
    position (``core.fair_share.fair_share_position``) after them: compared as a tuple,
    cohorts compete with their siblings first, then teams inside them."""
    spec = book.policy.by_team.get(team)
    path = spec.cohort if spec is not None else ()
    return tuple(book.cohort_share(level) for level in levels(path))


def _largest_fraction(book: QuotaBook, borrowed: Callable[[FlavorName], Resources]) -> float:
    largest = 0.0
    for flavor, capacity in book.capacity.items():
        for name, amount in borrowed(flavor).items():
            total = capacity.amount(name)
            if total > 0:
                largest = max(largest, amount / total)
    return largest


def _weighted(largest: float, weight: int) -> float:
    if largest == 0.0:
        return 0.0
    return largest / weight if weight > 0 else float("inf")


def free_to_borrow(book: QuotaBook, team: TeamName, flavor: FlavorName) -> Resources:
    """How much of each covered resource ``team`` could borrow now beyond its guarantee if its
    borrow limit allowed any amount: what lenders and idle capacity could still back once its
    own guarantee is used up. Read from the books (charge the flavor's whole capacity on a
    copy and see how much of the new borrowing stays unbacked)."""
    whole = book.covered(flavor, book.capacity.get(flavor, Resources()))
    trial = book.copy()
    trial.charge(team, flavor, whole)
    more = positive(trial.borrowed(team, flavor) - book.borrowed(team, flavor))
    return positive(more - trial.shortfall(flavor))
