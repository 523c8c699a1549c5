"""The books' arithmetic on fixed-order tuples against a straightforward reference on
``Resources``: on random policies of two covered resources (GPUs and CPUs; teams in cohorts
with guarantees, borrowing and lending limits; idle sharing on or off), after random charges
and releases, every figure and every quota verdict is the reference's."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.cohort_tree import CohortTree, Flow, levels
from topoq.core.quota import QuotaBook, QuotaVerdict
from topoq.domain.governance import (
    ClusterPolicy,
    CohortPath,
    CohortQuota,
    CohortSpec,
    FlavorName,
    FlavorQuota,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.resources import Resources

FLAVOR, ELSEWHERE = FlavorName("p5"), FlavorName("absent")
GPU, CPU = "nvidia.com/gpu", "cpu"
COVERS = frozenset({GPU, CPU})
PATHS: tuple[CohortPath, ...] = ((), ("org",), ("org", "x"), ("org", "y"), ("lab",))
NOTHING = Resources()
CAPACITY = {FLAVOR: Resources({GPU: 64, CPU: 640, "memory": 10**12})}

amounts = st.builds(
    lambda gpus, cpus: Resources({GPU: gpus, CPU: cpus}),
    st.sampled_from([0, 4, 8, 16]),
    st.sampled_from([0, 40, 80]),
)
limits = st.none() | amounts


@st.composite
def policies(draw: st.DrawFn) -> ClusterPolicy:
    teams = []
    for index in range(draw(st.integers(1, 5))):
        quota = FlavorQuota(FLAVOR, draw(amounts), draw(amounts), draw(limits), covers=COVERS)
        teams.append(
            TeamSpec(
                TeamName(f"t{index}"),
                (quota,),
                draw(st.sampled_from(list(SharingStrategy))),
                cohort=draw(st.sampled_from(PATHS)),
                active=draw(st.booleans()),
            )
        )
    cohorts = []
    chosen = draw(st.sets(st.sampled_from(PATHS[1:])))
    for path in sorted({level for named in chosen for level in levels(named)}):
        borrow, lend = draw(limits), draw(limits)
        quota = CohortQuota(
            FLAVOR,
            draw(amounts),
            borrow or Resources(),
            lend or Resources(),
            borrow_limited=frozenset() if borrow is None else frozenset({GPU}),
            lend_limited=frozenset() if lend is None else frozenset({CPU}),
        )
        cohorts.append(CohortSpec(path[-1], path[:-1], (quota,)))
    return ClusterPolicy(
        teams=tuple(teams), cohorts=tuple(cohorts), idle_resource_sharing=draw(st.booleans())
    )


def positive(resources: Resources) -> Resources:
    return Resources({name: value for name, value in resources.items() if value > 0})


def summed(*parts: Resources) -> Resources:
    total = Resources()
    for part in parts:
        total = total + part
    return total


def over(amount: Resources, limit: Resources, limited: frozenset[str]) -> Resources:
    return Resources({n: amount.amount(n) - limit.amount(n) for n in limited})


class Reference:
    """The rules of ``core.cohort_tree`` and ``core.quota`` written out plainly."""

    def __init__(self, book: QuotaBook, flavor: FlavorName) -> None:
        self.policy, self.flavor, self.tree = book.policy, flavor, CohortTree.of(book.policy)
        self.covered = COVERS if flavor in book.capacity else frozenset()
        self.usage, self.capacity = book.usage, book.capacity

    def cover(self, resources: Resources) -> Resources:
        return Resources({n: v for n, v in resources.items() if n in self.covered})

    def used(self, team: TeamName) -> Resources:
        return self.cover(self.usage.get(team, {}).get(self.flavor, Resources()))

    def guarantee(self, spec: TeamSpec) -> Resources:
        quota = spec.quota_for(self.flavor)
        return quota.guarantee if quota else Resources()

    def need(self, spec: TeamSpec, used: Resources) -> Resources:
        return positive(used - self.guarantee(spec))

    def offer(self, spec: TeamSpec, used: Resources) -> Resources:
        quota = spec.quota_for(self.flavor)
        if quota is None or not spec.sharing.lends or not spec.active:
            return Resources()
        unused = positive(quota.guarantee - used)
        if quota.lending_limit is None:
            return unused
        limit = quota.lending_limit
        return Resources({n: min(unused.amount(n), limit.amount(n)) for n in COVERS})

    def flow(self, changed: TeamName | None = None, more: Resources = NOTHING) -> Flow:
        team_need, team_offer = {}, {}
        need, offer, over_limit, supply, demand = {}, {}, {}, {}, {}
        for path in self.tree.order:
            quota = self.tree.quota(path, self.flavor)
            supply[path] = self.cover(quota.guarantee) if quota else Resources()
            demand[path] = Resources()
            for name in self.tree.teams.get(path, ()):
                spec = self.policy.by_team[name]
                used = self.used(name) + (more if name == changed else Resources())
                team_need[name], team_offer[name] = self.need(spec, used), self.offer(spec, used)
                supply[path] += team_offer[name]
                demand[path] += team_need[name]
            for child in self.tree.children.get(path, ()):
                supply[path] += offer[child]
                demand[path] += need[child]
            short, spare = (
                positive(demand[path] - supply[path]),
                positive(supply[path] - demand[path]),
            )
            over_limit[path] = Resources()
            if quota is not None:
                over_limit[path] = positive(over(short, quota.borrow_limit, quota.borrow_limited))
                spare -= positive(over(spare, quota.lending_limit, quota.lend_limited))
            need[path], offer[path] = short - over_limit[path], spare
        top_need = summed(*(need[path] for path in self.tree.order if len(path) <= 1))
        idle = Resources()
        if self.policy.idle_resource_sharing:
            guaranteed = summed(
                *(
                    self.tree.guaranteed.get(top, {}).get(self.flavor, Resources())
                    for top in self.tree.order
                    if len(top) <= 1
                )
            )
            idle = positive(self.cover(self.capacity.get(self.flavor, Resources())) - guaranteed)
        unserved = positive(top_need - idle)
        return Flow(
            team_need, need, offer, over_limit, unserved, team_offer, supply, demand, top_need, idle
        )

    def verdict(self, team: TeamName, demand: Resources) -> QuotaVerdict:
        spec = self.policy.by_team[team]
        if not spec.active:
            return QuotaVerdict.UNKNOWN_TEAM
        demand = self.cover(demand)
        after, guarantee = self.used(team) + demand, self.guarantee(spec)
        within = after.fits_in(guarantee)
        quota = spec.quota_for(self.flavor)
        if not within and not spec.sharing.borrows:
            return QuotaVerdict.NO_QUOTA
        limit = quota.borrow_limit if quota else Resources()
        if not within and not positive(after - guarantee).fits_in(limit):
            return QuotaVerdict.BORROW_LIMIT
        now, then = self.flow(), self.flow(team, demand)
        if any(
            positive(then.over_limit[level] - now.over_limit[level])
            for level in levels(spec.cohort)
        ):
            return QuotaVerdict.BORROW_LIMIT
        if not within and positive(then.unserved - now.unserved):
            return QuotaVerdict.NO_LENDER
        return QuotaVerdict.WITHIN_GUARANTEE if within else QuotaVerdict.BORROWING


changes = st.lists(
    st.tuples(st.integers(0, 4), st.sampled_from([FLAVOR, ELSEWHERE]), amounts, st.booleans()),
    max_size=6,
)


@settings(max_examples=200, deadline=None)
@given(policies(), changes, amounts)
def test_the_books_figures_and_verdicts_are_the_references(
    rules: ClusterPolicy, moves: list[tuple[int, FlavorName, Resources, bool]], demand: Resources
) -> None:
    book = QuotaBook(rules, CAPACITY)
    names = [spec.name for spec in rules.teams]
    trials = []
    for index, flavor, amount, charge in moves:
        team = names[index % len(names)]
        book.flow(flavor)  # settled, so that the change below updates the settlement
        trials.append((book.copy(), {t: dict(f) for t, f in book.usage.items()}))
        if charge:
            book.charge(team, flavor, amount + Resources({"memory": 1}))
        else:
            book.release(team, flavor, amount)
    for trial, usage in trials:  # a copy shares the figures until either changes them
        assert trial.usage == usage
        assert trial.flow(FLAVOR) == Reference(trial, FLAVOR).flow()
    for flavor in (FLAVOR, ELSEWHERE):
        reference = Reference(book, flavor)
        assert book.flow(flavor) == reference.flow()
        assert book.shortfall(flavor) == reference.flow().shortfall
        for spec in rules.teams:
            used = reference.used(spec.name)
            assert book.borrowed(spec.name, flavor) == reference.need(spec, used)
            assert book.lendable(spec.name, flavor) == reference.offer(spec, used)
            assert book.check(spec.name, flavor, demand).verdict is reference.verdict(
                spec.name, demand
            )


@settings(max_examples=150, deadline=None)
@given(policies(), changes, st.integers(0, 4), amounts, amounts, amounts, st.booleans())
def test_books_under_a_changed_team_quota_are_books_built_for_that_policy(
    rules: ClusterPolicy,
    moves: list[tuple[int, FlavorName, Resources, bool]],
    who: int,
    used: Resources,
    guarantee: Resources,
    limit: Resources,
    elsewhere: bool,
) -> None:
    """``QuotaBook.under`` adjusts the terms for one team's new quota (what a remedy tries)
    instead of working them out again: every answer is a new book's."""
    flavor = ELSEWHERE if elsewhere else FLAVOR
    spec = rules.teams[who % len(rules.teams)]
    book = QuotaBook(rules, CAPACITY, {spec.name: {flavor: used}})
    for index, moved, amount, charge in moves:
        team = rules.teams[index % len(rules.teams)].name
        (book.charge if charge else book.release)(team, moved, amount)
    book.flow(FLAVOR), book.flow(ELSEWHERE)  # both flavors' figures counted
    quota = spec.quota_for(flavor) or FlavorQuota(flavor, Resources())
    changed = replace(quota, guarantee=guarantee, borrow_limit=limit)
    others = tuple(q for q in spec.quotas if q.flavor != flavor)
    teams = tuple(
        replace(t, quotas=(*others, changed)) if t.name == spec.name else t for t in rules.teams
    )
    policy = replace(rules, teams=teams)
    derived, fresh = book.under(policy, spec.name, flavor), QuotaBook(policy, CAPACITY, book.usage)
    for asked in (FLAVOR, ELSEWHERE):
        assert derived.flow(asked) == fresh.flow(asked)
        for team in teams:
            assert derived.check(team.name, asked, limit) == fresh.check(team.name, asked, limit)
            assert derived.lent(team.name, asked) == fresh.lent(team.name, asked)
            assert derived.within_guarantee(team.name, asked, limit) == fresh.within_guarantee(
                team.name, asked, limit
            )
        for path in derived.tree.order:
            assert derived.cohort_borrowed(path, asked) == fresh.cohort_borrowed(path, asked)
    for path in derived.tree.order:
        assert derived.cohort_share(path) == fresh.cohort_share(path)


@settings(max_examples=150, deadline=None)
@given(
    policies(),
    st.lists(st.tuples(st.booleans(), st.integers(0, 7), st.integers(0, 4), amounts), max_size=12),
)
def test_copies_of_copies_keep_their_own_figures_whoever_changes_first(
    rules: ClusterPolicy, steps: list[tuple[bool, int, int, Resources]]
) -> None:
    """Books copied from one another share their figures until one changes them: a change
    to any of them never shows in another, however the copies were made."""
    books = [QuotaBook(rules, CAPACITY)]
    usages: list[dict[TeamName, Resources]] = [{}]
    for copy, which, who, amount in steps:
        index = which % len(books)
        books[index].flow(FLAVOR)  # a settlement to share
        if copy:
            books.append(books[index].copy())
            usages.append(dict(usages[index]))
            continue
        team = rules.teams[who % len(rules.teams)].name
        books[index].charge(team, FLAVOR, amount)
        usages[index][team] = usages[index].get(team, Resources()) + amount
    for book, usage in zip(books, usages, strict=True):
        assert {t: f[FLAVOR] for t, f in book.usage.items() if f.get(FLAVOR)} == {
            t: u for t, u in usage.items() if u
        }
        assert book.flow(FLAVOR) == Reference(book, FLAVOR).flow()
