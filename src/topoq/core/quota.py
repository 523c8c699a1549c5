"""Quota accounting for one cycle: guarantees, borrowing within limits, lending, idle capacity.

Per flavor and per *covered* resource (one that some team's guarantee names for the flavor;
others are limited by physical capacity alone):

- a team's **borrowed** amount is its usage above its guarantee;
- a team **lends** its unused guarantee (up to its lending limit) unless it is DontLend;
- teams share within their **pool**, the root of their cohort path (teams without a cohort
  share one cluster-wide pool); **idle** capacity — what no team is guaranteed — is borrowable
  by every pool when idle resource sharing is on;
- the books balance when, summed over pools, what each pool borrows beyond what its own
  members lend fits in the idle capacity.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum

from topoq.domain.governance import ClusterPolicy, FlavorName, TeamName, TeamSpec
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
    ) -> None:
        self.policy = policy
        self.capacity = dict(capacity)
        self.usage: dict[TeamName, dict[FlavorName, Resources]] = {
            team: dict(flavors) for team, flavors in (usage or {}).items()
        }
        self.changes: dict[TeamName, int] = {}
        """How often each team's usage changed in this book (for callers that cache)."""
        self._covered = {flavor: self._covered_names(flavor) for flavor in self.capacity}

    def copy(self) -> QuotaBook:
        return QuotaBook(self.policy, self.capacity, self.usage)

    def _covered_names(self, flavor: FlavorName) -> frozenset[str]:
        names: set[str] = set()
        for team in self.policy.teams:
            quota = team.quota_for(flavor)
            if quota is not None:
                names.update(quota.covers)
        return frozenset(names)

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
        spec = self.policy.by_team.get(team)
        if spec is None or not spec.sharing.lends or not spec.active:
            return Resources()
        quota = spec.quota_for(flavor)
        if quota is None:
            return Resources()
        unused = positive(quota.guarantee - self.covered(flavor, self.used(team, flavor)))
        return unused if quota.lending_limit is None else at_most(unused, quota.lending_limit)

    def idle(self, flavor: FlavorName) -> Resources:
        """Capacity of the flavor no team is guaranteed (borrowable when sharing is on)."""
        if not self.policy.idle_resource_sharing:
            return Resources()
        guaranteed = Resources()
        for team in self.policy.teams:
            if team.active:  # an inactive team's quota is not in force: its share is idle
                guaranteed = guaranteed + self.guarantee(team.name, flavor)
        return positive(self.covered(flavor, self.capacity.get(flavor, Resources())) - guaranteed)

    def lent(self, team: TeamName, flavor: FlavorName) -> Resources:
        """The part of the team's unused guarantee that borrowers use now. Borrowers draw on
        idle capacity first, then on their pool's lenders, in proportion to what each lends."""
        spec = self.policy.by_team.get(team)
        if spec is None:
            return Resources()
        members = _pools(self.policy.teams)[pool_of(spec)]
        borrowed = _total(self.borrowed(member, flavor) for member in members)
        lendable = _total(self.lendable(member, flavor) for member in members)
        from_lenders = positive(borrowed - self.idle(flavor))
        mine = self.lendable(team, flavor)
        return Resources(
            {
                name: min(amount, amount * from_lenders.amount(name) // lendable.amount(name))
                for name, amount in mine.items()
                if lendable.amount(name)
            }
        )

    # --- books ----------------------------------------------------------------------
    def charge(self, team: TeamName, flavor: FlavorName, amount: Resources) -> None:
        self.changes[team] = self.changes.get(team, 0) + 1
        flavors = self.usage.setdefault(team, {})
        flavors[flavor] = flavors.get(flavor, Resources()) + amount

    def release(self, team: TeamName, flavor: FlavorName, amount: Resources) -> None:
        self.changes[team] = self.changes.get(team, 0) + 1
        flavors = self.usage.setdefault(team, {})
        flavors[flavor] = positive(flavors.get(flavor, Resources()) - amount)

    def shortfall(self, flavor: FlavorName) -> Resources:
        """How much borrowing exceeds what lenders and idle capacity can back (zero when the
        books balance)."""
        per_pool_need = Resources()
        for members in _pools(self.policy.teams).values():
            borrowed = _total(self.borrowed(team, flavor) for team in members)
            lent = _total(self.lendable(team, flavor) for team in members)
            per_pool_need = per_pool_need + positive(borrowed - lent)
        return positive(per_pool_need - self.idle(flavor))

    def within_guarantee(self, team: TeamName, flavor: FlavorName, demand: Resources) -> bool:
        """Whether taking ``demand`` keeps the team inside its guarantee (lending is not
        affected by the team's own use of its guarantee, so no balance check is needed)."""
        spec = self.policy.by_team.get(team)
        if spec is None or not spec.active:
            return False
        after = self.covered(flavor, self.used(team, flavor) + demand)
        return after.fits_in(self.guarantee(team, flavor))

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
            return self._balanced(team, flavor, demand, QuotaVerdict.WITHIN_GUARANTEE, spec)
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
        return self._balanced(spec.name, flavor, demand, QuotaVerdict.BORROWING, spec)

    def _balanced(
        self,
        team: TeamName,
        flavor: FlavorName,
        demand: Resources,
        verdict: QuotaVerdict,
        spec: TeamSpec,
    ) -> QuotaCheck:
        trial = self.copy()
        trial.charge(team, flavor, demand)
        missing = trial.shortfall(flavor)
        if missing and verdict is QuotaVerdict.BORROWING:
            return QuotaCheck(
                QuotaVerdict.NO_LENDER,
                f"team {team} {self.describe(team, flavor)}; it needs {_fmt(demand)} and no "
                f"lender has room for {_fmt(missing)} of it",
                self._numbers(team, flavor, demand) | {"missing": _fmt(missing)},
            )
        message = f"team {team} {self.describe(team, flavor)}"
        return QuotaCheck(verdict, message, self._numbers(team, flavor, demand))

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


def pool_of(team: TeamSpec) -> str:
    return team.cohort[0] if team.cohort else ""


def _pools(teams: Iterable[TeamSpec]) -> dict[str, list[TeamName]]:
    pools: dict[str, list[TeamName]] = {}
    for team in teams:
        pools.setdefault(pool_of(team), []).append(team.name)
    return pools


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
    largest = 0.0
    for flavor, capacity in book.capacity.items():
        for name, amount in book.borrowed(team, flavor).items():
            total = capacity.amount(name)
            if total > 0:
                largest = max(largest, amount / total)
    if largest == 0.0:
        return 0.0
    weight = spec.fair_share_weight if spec is not None else 0
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
