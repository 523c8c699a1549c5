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

A share of a GPU (``topoq.io/gpu-milli``) counts as that fraction of ``nvidia.com/gpu`` in
every figure (:mod:`topoq.core.quota_terms` keeps GPUs in thousandths); messages and numbers
show GPUs in GPUs: whole amounts as before, a part of one as a decimal (``3.5``).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from topoq.core.cohort_tree import CohortTree, Flow, PathFlow, closest_common, levels
from topoq.core.quota_flow import PathSettlement, Settlement, path_after, settled, with_team
from topoq.core.quota_flow import drawn as drawn_from
from topoq.core.quota_terms import (
    Amounts,
    FlavorTerms,
    above_zero,
    fits,
    minus,
    plus,
    smaller,
    terms_of,
    total,
)
from topoq.domain.governance import (
    ClusterPolicy,
    CohortPath,
    FlavorName,
    IdleAllocation,
    TeamName,
    TeamSpec,
)
from topoq.domain.gpu_share import GPU_MILLI_PER_GPU, GPU_SHARE, gpus_text
from topoq.domain.lint import accelerators_first, readable_amount
from topoq.domain.quantity import NVIDIA_GPU
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


class QuotaCheck:
    """A quota check's answer: its verdict, and the message and numbers that explain it.

    The message and numbers are written out when first read, from the figures as they stood
    at the check (``explain``: a function of values that never change): most checks of a cycle
    are never explained (a wait that keeps its reason keeps its diagnostic, ADR 0007), and
    writing them out was a third of a check's cost. Equal as the frozen dataclass it was:
    verdict, message and numbers."""

    __slots__ = ("_explain", "_message", "_numbers", "team_only", "verdict")

    def __init__(
        self,
        verdict: QuotaVerdict,
        message: str = "",
        numbers: Mapping[str, int | str] | None = None,
        team_only: bool = False,
        *,
        explain: Callable[[], tuple[str, Mapping[str, int | str]]] | None = None,
    ) -> None:
        self.verdict = verdict
        self.team_only = team_only
        """Whether the answer (verdict, message and numbers) follows from the policy and the
        team's own usage of the flavor alone (``QuotaBook.team_figures``), not from other
        teams' usage: a team that may not borrow or would borrow over its own limit."""
        self._message = message
        self._numbers: Mapping[str, int | str] = {} if numbers is None else numbers
        self._explain = explain

    def _written(self) -> None:
        explain = self._explain
        if explain is not None:
            self._message, self._numbers = explain()
            self._explain = None

    @property
    def message(self) -> str:
        self._written()
        return self._message

    @property
    def numbers(self) -> Mapping[str, int | str]:
        self._written()
        return self._numbers

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, QuotaCheck):
            return NotImplemented
        return (self.verdict, self.message, self.numbers) == (
            other.verdict,
            other.message,
            other.numbers,
        )

    def __hash__(self) -> int:
        return hash((self.verdict, self.message))

    def __repr__(self) -> str:
        return (
            f"QuotaCheck(verdict={self.verdict!r}, message={self.message!r}, "
            f"numbers={self.numbers!r}, team_only={self.team_only!r})"
        )


UsageSums = Mapping[TeamName, Mapping[FlavorName, Mapping[str, int]]]
"""Per team and flavor, the amounts its holders use (as ``holdings.PreparedLedger.sums``)."""


def positive(resources: Resources) -> Resources:
    return Resources({name: value for name, value in resources.items() if value > 0})


@dataclass
class _FlavorBook:
    """One flavor's figures in a book, as ``Amounts``: each team's covered usage, each
    cohort's subtree usage, and (cached until a change) the settlement and what each team's
    offer lends. Books copied from one another share it until one of them changes it
    (``QuotaBook._changing``); filling in a cache is no change (the figures are the same)."""

    terms: FlavorTerms
    capacity: Amounts
    used: dict[TeamName, Amounts]
    cohort_used: dict[CohortPath, Amounts]
    settlement: Settlement | None = None
    lent: dict[TeamName, Resources] | None = None
    unsettled: tuple[TeamName, CohortPath] | None = None
    """A team (and its cohort path) charged since ``settlement`` was last kept in step: its
    path is settled again when the settlement is next read, not at the charge — a trial's
    books are often dropped having read only usage (what a job would borrow)."""

    def copied(self) -> _FlavorBook:
        return _FlavorBook(
            self.terms,
            self.capacity,
            dict(self.used),
            dict(self.cohort_used),
            self.settlement,
            self.lent,
            self.unsettled,
        )


class QuotaBook:
    """Usage per team and flavor, with the policy and the cluster's capacity per flavor.

    Mutable within a cycle; ``copy()`` before a trial. The arithmetic runs on fixed-order
    tuples of the covered resources (:mod:`topoq.core.quota_terms`, worked out once per
    policy), a flavor's counted when the book is first asked about it; what the book answers
    is ``Resources``."""

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
        self._terms = terms_of(policy, tree)
        self.tree = self._terms.tree
        self._books: dict[FlavorName, _FlavorBook] = {}
        self._owned: set[FlavorName] = set()
        """The flavors whose figures this book alone holds (it may change them in place)."""
        self._shares: dict[CohortPath, float] = {}
        self.memo: dict[Hashable, object] = {}
        """Answers derived from the books as they stand (a waiting job's quota remedies), for
        callers that ask again; cleared by every change."""

    def counted(self) -> QuotaBook:
        """These books with every flavor of the cluster counted now (not when first asked):
        books that copies are made of (``following``, a cycle's working copy) share those
        figures, and the settlements a copy works out, instead of counting them each."""
        for flavor in self.capacity:
            self._book(flavor)
        return self

    def following(self, before: UsageSums, after: UsageSums) -> QuotaBook:
        """The books of the usage ``after`` (per team and flavor, as
        ``holdings.PreparedLedger.sums`` keeps it), derived from these books, which must be
        those of ``before`` with nothing charged since: only the teams' flavors whose sums
        are not the very same objects are booked again, each keeping the settlement in step
        (``_booked``), instead of every team's usage counted and every cohort settled
        afresh. The same figures and answers as ``QuotaBook(policy, capacity, usage)``, the
        usage in the same order."""
        twin = self.copy()
        usage: dict[TeamName, dict[FlavorName, Resources]] = {}
        moved: list[tuple[TeamName, FlavorName, Resources]] = []
        for team, flavors in after.items():
            sums_before, known = before.get(team, {}), self.usage.get(team, {})
            mine: dict[FlavorName, Resources] = {}
            for flavor, amount in flavors.items():
                same = known.get(flavor)
                if same is None or sums_before.get(flavor) is not amount:
                    same = Resources(amount)
                    moved.append((team, flavor, same))
                mine[flavor] = same
            usage[team] = mine
        for team, flavors in before.items():
            now = after.get(team, {})
            moved.extend((team, flavor, Resources()) for flavor in flavors if flavor not in now)
        for team, flavor, amount in moved:
            if flavor in twin._books:  # else counted from ``usage`` when first asked
                spec = self.policy.by_team.get(team)
                path = levels(spec.cohort) if spec is not None else []
                twin._booked(team, spec, path, flavor, amount)
        twin.usage = usage
        twin._shares = {}
        return twin

    def copy(self) -> QuotaBook:
        """The same books for a trial: the figures shared (not recounted from every team's
        usage, as a new book would) until either book changes them — then the changing one
        copies the flavor's first (copy on write: most trials change one flavor of one team,
        or nothing) — and the caches kept. ``changes`` starts afresh."""
        twin = QuotaBook.__new__(QuotaBook)
        twin.policy, twin.tree, twin._terms = self.policy, self.tree, self._terms
        twin.capacity = self.capacity
        twin.usage = dict(self.usage)  # a team's dict of flavors is replaced, never changed
        twin.changes = {}
        twin._books = dict(self._books)
        twin._owned, self._owned = set(), set()  # neither may change what both now hold
        twin._shares = dict(self._shares)
        twin.memo = {}
        return twin

    def under(self, policy: ClusterPolicy, team: TeamName, flavor: FlavorName) -> QuotaBook:
        """These books under ``policy``, which differs from this book's only in ``team``'s
        quota of ``flavor`` (a remedy to try): the same as ``QuotaBook(policy, capacity,
        usage)``, with the terms adjusted for the one team instead of worked out again and
        every team's usage kept, not counted again."""
        twin = self.copy()
        twin.policy = policy
        twin._terms = self._terms.with_team_quota(policy, team, flavor)
        twin.tree = twin._terms.tree
        twin._shares = {}
        for name, book in self._books.items():
            terms = twin._terms.known(name, book.terms.counted)
            if terms is None:
                del twin._books[name]  # counted again when asked
            elif terms is not book.terms:
                twin._books[name] = _FlavorBook(terms, book.capacity, book.used, book.cohort_used)
        return twin

    def _book(self, flavor: FlavorName) -> _FlavorBook:
        """The flavor's figures, counted from every team's usage when first asked."""
        known = self._books.get(flavor)
        if known is None:
            known = self._books[flavor] = self._counted(flavor)
            self._owned.add(flavor)
        return known

    def _changing(self, flavor: FlavorName) -> _FlavorBook:
        """The flavor's figures, this book's own to change (copied if shared with a copy)."""
        known = self._book(flavor)
        if flavor not in self._owned:
            known = self._books[flavor] = known.copied()
            self._owned.add(flavor)
        return known

    def _counted(self, flavor: FlavorName) -> _FlavorBook:
        terms = self._terms.flavor(flavor, flavor in self.capacity)
        used: dict[TeamName, Amounts] = {}
        cohort_used: dict[CohortPath, Amounts] = {}
        for team, flavors in self.usage.items():
            amount = flavors.get(flavor)
            if amount is None:
                continue
            used[team] = covered = terms.amounts(amount)
            spec = self.policy.by_team.get(team)
            if spec is not None and any(covered):
                for level in levels(spec.cohort):
                    cohort_used[level] = plus(cohort_used.get(level, terms.zero), covered)
        capacity = terms.quota_amounts(self.capacity.get(flavor, Resources()))  # whole devices
        return _FlavorBook(terms, capacity, used, cohort_used)

    def covered(self, flavor: FlavorName, resources: Resources) -> Resources:
        """Only the resources quotas speak about for this flavor, by name: a share of a GPU
        (``topoq.io/gpu-milli``) is not among them (``terms(flavor).covered`` keeps it)."""
        terms = self._book(flavor).terms
        return resources.restricted_to(terms.column) if terms.counted else Resources()

    def terms(self, flavor: FlavorName) -> FlavorTerms:
        """The flavor's quotas as the books count them (``Amounts`` and back)."""
        return self._book(flavor).terms

    # --- per-team figures -------------------------------------------------------------
    def team_figures(self, team: TeamName, flavors: Sequence[FlavorName]) -> tuple[object, ...]:
        """What a check with ``team_only`` answers from, for each of ``flavors``: the team's
        covered usage (equal figures, equal answers on the same policy)."""
        return tuple(self._book(flavor).used.get(team) for flavor in flavors)

    def used(self, team: TeamName, flavor: FlavorName) -> Resources:
        return self.usage.get(team, {}).get(flavor, Resources())

    def guarantee(self, team: TeamName, flavor: FlavorName) -> Resources:
        spec = self.policy.by_team.get(team)
        quota = spec.quota_for(flavor) if spec is not None else None
        return quota.guarantee if quota is not None else Resources()

    def borrowed(self, team: TeamName, flavor: FlavorName) -> Resources:
        book = self._book(flavor)
        return book.terms.resources(_need(book, team, book.used.get(team, book.terms.zero)))

    def lendable(self, team: TeamName, flavor: FlavorName) -> Resources:
        book = self._book(flavor)
        return book.terms.resources(_offer(book, team, book.used.get(team, book.terms.zero)))

    def idle(self, flavor: FlavorName) -> Resources:
        """Capacity of the flavor no team is guaranteed (borrowable when sharing is on)."""
        book = self._book(flavor)
        return book.terms.resources(self._idle(book))

    def _idle(self, book: _FlavorBook) -> Amounts:
        # an inactive team's quota is not in force: its share is idle (not in top_guaranteed)
        if not self.policy.idle_resource_sharing:
            return book.terms.zero
        return above_zero(minus(book.capacity, book.terms.top_guaranteed))

    def lent(self, team: TeamName, flavor: FlavorName) -> Resources:
        """The part of the team's unused guarantee that borrowers use now. Borrowers draw on
        their own cohort first (its own guarantee, then its members' offers in proportion to
        what each lends), then on the cohorts above; idle capacity last."""
        if team not in self.policy.by_team:
            return Resources()
        book = self._book(flavor)
        settlement = self._settlement(book)  # settling a charge may let ``lent`` go
        if book.lent is None:
            drawn = drawn_from(self.tree, book.terms, settlement)
            book.lent = {name: book.terms.resources(amounts) for name, amounts in drawn.items()}
        return book.lent.get(team, Resources())

    # --- cohorts --------------------------------------------------------------------
    def cohort_used(self, path: CohortPath, flavor: FlavorName) -> Resources:
        """The covered usage of every team under the cohort."""
        book = self._book(flavor)
        return book.terms.resources(book.cohort_used.get(path, book.terms.zero))

    def cohort_borrowed(self, path: CohortPath, flavor: FlavorName) -> Resources:
        """What the cohort's subtree uses above its subtree's guarantee."""
        book = self._book(flavor)
        return book.terms.resources(_cohort_need(book, path))

    def flow(self, flavor: FlavorName) -> Flow:
        """How the flavor's borrowing is served through the cohort tree now."""
        book = self._book(flavor)
        return self._settlement(book).as_flow(book.terms)

    def _settlement(self, book: _FlavorBook) -> Settlement:
        """The flavor's settlement (cached until the books change, and kept in step with each
        charge by settling the charged team's path again, when next read)."""
        if book.unsettled is not None:
            self._settle_charged(book, book.unsettled)
        if book.settlement is None:
            zero = book.terms.zero
            need: dict[TeamName, Amounts] = {}
            offer: dict[TeamName, Amounts] = {}
            for teams in self.tree.teams.values():
                for team in teams:
                    used = book.used.get(team, zero)
                    need[team], offer[team] = _need(book, team, used), _offer(book, team, used)
            book.settlement = settled(self.tree, book.terms, need, offer, self._idle(book))
        return book.settlement

    def _settle_charged(self, book: _FlavorBook, charged: tuple[TeamName, CohortPath]) -> None:
        """Keep the settlement in step with the team charged since: only its figures moved,
        so its path is settled again, not the whole tree (what each team lends is let go
        only if the settlement moved)."""
        team, path = charged
        used = book.used.get(team, book.terms.zero)
        need, offer = _need(book, team, used), _offer(book, team, used)
        assert book.settlement is not None  # a charge is left unsettled only on a settlement
        after = with_team(book.terms, book.settlement, team, path, need, offer)
        if after is not book.settlement:
            book.settlement, book.lent = after, None
        book.unsettled = None

    def _path_after(self, team: TeamSpec, book: _FlavorBook, demand: Amounts) -> PathSettlement:
        """The cohorts on the team's path once it takes ``demand`` more."""
        used = plus(book.used.get(team.name, book.terms.zero), demand)
        return path_after(
            book.terms,
            self._settlement(book),
            team.name,
            team.cohort,
            need=_need(book, team.name, used),
            offer=_offer(book, team.name, used),
        )

    def _flow_after(self, team: TeamSpec, flavor: FlavorName, demand: Resources) -> PathFlow:
        """:meth:`_path_after` read as ``Resources`` (what a check settles, for tests)."""
        book = self._book(flavor)
        return self._path_after(team, book, book.terms.amounts(demand)).as_path_flow(book.terms)

    def cohort_share(self, path: CohortPath) -> float:
        """The cohort's weighted share: the largest fraction of any covered resource of any
        flavor its subtree uses above its subtree's guarantee, over its fair-share weight."""
        known = self._shares.get(path)
        if known is None:
            largest = _largest_fraction(self, lambda figures: _cohort_need(figures, path))
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
        return any(self._settlement(self._book(flavor)).need.get(branch, ()))

    def _within_subtree(self, path: CohortPath, flavor: FlavorName, demand: Resources) -> bool:
        book = self._book(flavor)
        zero = book.terms.zero
        after = plus(book.cohort_used.get(path, zero), book.terms.amounts(demand))
        return fits(after, book.terms.subtree.get(path, zero))

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
        self._set(team, flavor, self.used(team, flavor) + amount)

    def release(self, team: TeamName, flavor: FlavorName, amount: Resources) -> None:
        self._set(team, flavor, positive(self.used(team, flavor) - amount))

    def _set(self, team: TeamName, flavor: FlavorName, amount: Resources) -> None:
        spec = self.policy.by_team.get(team)
        path = levels(spec.cohort) if spec is not None else []
        fair = self.policy.idle_allocation is IdleAllocation.FAIR_SHARE
        shares = [self.cohort_share(level) for level in path] if fair else []
        self._changing(flavor)  # counted before the change
        self.usage[team] = {**self.usage.get(team, {}), flavor: amount}
        self._booked(team, spec, path, flavor, amount)
        self.memo.clear()
        for level in path:
            self._shares.pop(level, None)
        self._count_change(team, flavor, path, shares)

    def _booked(
        self,
        team: TeamName,
        spec: TeamSpec | None,
        path: list[CohortPath],
        flavor: FlavorName,
        amount: Resources,
    ) -> None:
        """The flavor's figures once ``team`` uses ``amount`` of it (the flavor counted and
        this book's own): its usage, its cohorts' and the settlement kept in step."""
        book = self._changing(flavor)
        terms = book.terms
        before, after = book.used.get(team, terms.zero), terms.amounts(amount)
        book.used[team] = after
        delta = minus(after, before)
        if spec is not None and any(delta):
            for level in path:
                book.cohort_used[level] = plus(book.cohort_used.get(level, terms.zero), delta)
        if book.unsettled is not None and book.unsettled[0] != team:
            self._settle_charged(book, book.unsettled)  # one unsettled team at a time
        known = book.settlement
        if known is not None and spec is not None and team in known.team_need:
            book.unsettled = (team, spec.cohort)  # only its figures moved: settled when read
        else:
            book.settlement, book.lent, book.unsettled = None, None, None

    def _count_change(
        self, team: TeamName, flavor: FlavorName, path: list[CohortPath], shares: list[float]
    ) -> None:
        """The team's standing changed; so did that of every team below a cohort on its path
        that has a guarantee of its own for the flavor (whether their jobs stay within it
        moved too); and under fair share that of every team below the highest cohort on its
        path whose share moved (the cohort shares lead their positions)."""
        self.changes[team] = self.changes.get(team, 0) + 1
        guaranteed = next(
            (
                level
                for level in path
                if (own := self.tree.quota(level, flavor)) is not None and own.guarantee
            ),
            None,
        )  # the highest: its members include those of any below it
        if guaranteed is not None:
            for member in self.tree.members.get(guaranteed, ()):
                if member != team:
                    self.changes[member] = self.changes.get(member, 0) + 1
        for level, share in zip(path, shares, strict=False):
            if self.cohort_share(level) != share:
                for member in self.tree.members.get(level, ()):
                    if member != team:
                        self.changes[member] = self.changes.get(member, 0) + 1
                return

    def shortfall(self, flavor: FlavorName) -> Resources:
        """How much borrowing exceeds what lenders and idle capacity can back, or what cohorts'
        borrowing limits let in (zero when the books balance)."""
        book = self._book(flavor)
        return book.terms.resources(self._settlement(book).shortfall())

    def borrowed_if_charged(
        self, team: TeamName, flavor: FlavorName, demand: Resources
    ) -> Resources:
        """What ``borrowed(team, flavor)`` would be once ``team`` took ``demand`` more (a
        team's borrowing is its own usage above its guarantee: no settlement, no copy)."""
        book = self._book(flavor)
        terms = book.terms
        used = book.used.get(team, terms.zero)
        return terms.resources(_need(book, team, plus(used, terms.amounts(demand))))

    def shortfall_if_charged(
        self, team: TeamName, flavor: FlavorName, demand: Resources
    ) -> Resources:
        """What ``shortfall(flavor)`` would be once ``team`` took ``demand`` more: what a copy
        charged with it would answer, settled on the team's path alone (no copy, no charge:
        a waiting job's remedies ask it for every job they try)."""
        spec = self.policy.by_team.get(team)
        if spec is None:  # a team outside the cohort tree: only a charged copy settles it
            trial = self.copy()
            trial.charge(team, flavor, demand)
            return trial.shortfall(flavor)
        book = self._book(flavor)
        after = self._path_after(spec, book, book.terms.amounts(demand))
        over_limit = {**self._settlement(book).over_limit, **after.over_limit}
        return book.terms.resources(total(over_limit.values(), after.unserved))

    def admits_with_quota(
        self,
        team: TeamName,
        flavor: FlavorName,
        demand: Resources,
        *,
        guarantee: Resources,
        borrow_limit: Resources,
    ) -> bool | None:
        """Whether ``check(team, flavor, demand)`` would admit if ``team``'s quota of
        ``flavor`` had this guarantee and borrow limit (its lending limit and every other
        quota as they are): what these books ``under`` such a policy would answer, worked out
        without the policy, its terms and a whole settlement (a waiting job's remedies ask
        it, dozens of times a cycle). Such a quota moves only the team's need and offer and
        the idle capacity (no cohort's own guarantee or limits), so the team's path settled
        again from this settlement — as that policy's books stand, then with ``demand`` —
        is all of that policy's settlement that differs. None when either amount names a
        resource no quota of the flavor covers (that policy's terms would have another
        column: ask ``under``)."""
        spec = self.policy.by_team.get(team)
        if spec is None or not spec.active:
            return False  # UNKNOWN_TEAM under any quota
        book = self._book(flavor)
        terms = book.terms
        given, limit = _covered_amounts(terms, guarantee), _covered_amounts(terms, borrow_limit)
        if given is None or limit is None:
            return None
        used = book.used.get(team, terms.zero)
        after = plus(used, terms.amounts(demand))
        within = fits(after, given)
        if not within and not (
            spec.sharing.borrows and fits(above_zero(minus(after, given)), limit)
        ):
            return False  # NO_QUOTA or BORROW_LIMIT, as ``check`` would find
        settlement, lending_limit = self._settlement(book), terms.lending_limit[team]

        def settled_with(amounts: Amounts) -> PathSettlement:
            """The team's path once it uses ``amounts`` under the changed quota (which it
            now has: it lends if its sharing does, the team being active)."""
            unused = above_zero(minus(given, amounts))
            offer = unused if lending_limit is None else smaller(unused, lending_limit)
            return path_after(
                terms,
                settlement,
                team,
                spec.cohort,
                need=above_zero(minus(amounts, given)),
                offer=offer if spec.sharing.lends else terms.zero,
            )

        standing, taking = settled_with(used), settled_with(after)
        path = levels(spec.cohort)
        for level in path:
            if any(above_zero(minus(taking.over_limit[level], standing.over_limit[level]))):
                return False  # a cohort over its borrowing limit, as ``_balanced`` finds
        if within:
            return True
        idle = terms.zero
        if self.policy.idle_resource_sharing:  # the team's guarantee is no longer idle
            guaranteed = plus(terms.top_guaranteed, minus(given, terms.guarantee[team]))
            idle = above_zero(minus(book.capacity, guaranteed))
        top, top_need = path[0], settlement.top_need

        def unserved(moved: PathSettlement) -> Amounts:
            """What idle capacity cannot serve (``moved.unserved`` is read against this
            settlement's idle capacity; under the changed quota it is ``idle``)."""
            need = plus(top_need, minus(moved.need[top], settlement.need[top]))
            return above_zero(minus(need, idle))

        return not any(above_zero(minus(unserved(taking), unserved(standing))))

    def guarantees_fit_with(
        self, team: TeamName, flavor: FlavorName, guarantee: Resources
    ) -> bool | None:
        """Whether the active teams' guarantees of ``flavor``, ``team``'s being ``guarantee``,
        fit in the flavor's capacity of the resources its quotas cover (any do for a flavor
        the cluster lacks). The guarantees are summed once per policy and flavor; None when
        ``guarantee`` names a resource no quota of the flavor covers."""
        book = self._book(flavor)
        terms = book.terms
        given = _covered_amounts(terms, guarantee)
        if given is None:
            return None
        if not terms.counted:
            return True
        guaranteed = _active_guaranteed(self.policy, terms)
        spec = self.policy.by_team.get(team)
        if spec is not None and spec.active:
            guaranteed = plus(guaranteed, minus(given, terms.guarantee[team]))
        # as ``Resources.fits_in``: only what is guaranteed at all must fit
        return all(
            value <= room for value, room in zip(guaranteed, book.capacity, strict=True) if value
        )

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
        book = self._book(flavor)
        terms = book.terms
        after = plus(book.used.get(spec.name, terms.zero), terms.amounts(demand))
        return fits(after, terms.guarantee[spec.name])

    def own_guarantee_after(
        self, team: TeamName, flavor: FlavorName, demand: Resources
    ) -> bool | None:
        """Whether the team, taking ``demand`` more, stays within its own guarantee of the
        flavor (whether or not it is active); None when it would then use none of the
        resources the flavor's quotas cover."""
        book = self._book(flavor)
        terms = book.terms
        after = plus(book.used.get(team, terms.zero), terms.amounts(demand))
        if not any(after):
            return None
        return fits(after, terms.guarantee.get(team, terms.zero))

    def on_own_usage(self, team: TeamName) -> bool:
        """Whether ``check`` of ``team`` depends on the team's own usage alone: a team in no
        cohort that never borrows is admitted within its guarantee and refused past it,
        whatever the other teams use."""
        spec = self.policy.by_team.get(team)
        return spec is not None and not spec.cohort and not spec.sharing.borrows

    def check(self, team: TeamName, flavor: FlavorName, demand: Resources) -> QuotaCheck:
        """Whether ``team`` may take ``demand`` more of ``flavor`` now. Memoized on the books
        while they stand (``memo``): a cycle asks again for every job of a team that wants as
        much, until the next charge. Callers share the answer: they copy ``numbers`` to add
        to them."""
        spec = self.policy.by_team.get(team)
        if spec is None or not spec.active:
            state = "unknown" if spec is None else "inactive"
            message = f"team {team!r} is {state}"
            return QuotaCheck(QuotaVerdict.UNKNOWN_TEAM, message, team_only=True)
        book = self._book(flavor)
        asked = book.terms.amounts(demand)
        key = ("quota-check", team, flavor, asked)
        known = self.memo.get(key)
        if isinstance(known, QuotaCheck):
            return known
        used = book.used.get(team, book.terms.zero)
        after = plus(used, asked)
        guarantee = book.terms.guarantee[team]
        if fits(after, guarantee):
            answer = self._balanced(spec, flavor, asked, used, QuotaVerdict.WITHIN_GUARANTEE)
        else:
            over = above_zero(minus(after, guarantee))
            answer = self._borrowing(spec, flavor, asked, used, over)
        self.memo[key] = answer
        return answer

    def _borrowing(
        self, spec: TeamSpec, flavor: FlavorName, demand: Amounts, used: Amounts, over: Amounts
    ) -> QuotaCheck:
        terms = self._book(flavor).terms
        if not spec.sharing.borrows:
            return QuotaCheck(
                QuotaVerdict.NO_QUOTA,
                team_only=True,
                explain=self._explaining(
                    terms,
                    spec,
                    flavor,
                    demand,
                    used,
                    lambda: (
                        f"it needs {_fmt(terms.resources(over))} more and may not borrow "
                        f"({spec.sharing.value})",
                        {},
                    ),
                ),
            )
        if not fits(over, terms.borrow_limit[spec.name]):

            def over_limit() -> tuple[str, dict[str, int | str]]:
                quota = spec.quota_for(flavor)
                limit = quota.borrow_limit if quota is not None else Resources()
                return (
                    f"it would borrow {_fmt(terms.resources(over))}, over its borrow limit of "
                    f"{_fmt(limit) or 'nothing'}",
                    {},
                )

            return QuotaCheck(
                QuotaVerdict.BORROW_LIMIT,
                team_only=True,
                explain=self._explaining(terms, spec, flavor, demand, used, over_limit),
            )
        return self._balanced(spec, flavor, demand, used, QuotaVerdict.BORROWING)

    def _balanced(
        self,
        spec: TeamSpec,
        flavor: FlavorName,
        demand: Amounts,
        used: Amounts,
        verdict: QuotaVerdict,
    ) -> QuotaCheck:
        """The verdict unless taking ``demand`` would make the books worse: a cohort on the
        team's path over its borrowing limit (even for work within the team's guarantee: the
        lender takes back what its cohort's members borrowed, so they must be reclaimed), or,
        for borrowing, more than lenders and idle capacity can serve (``used``: the team's
        usage now, which the message names)."""
        book = self._book(flavor)
        terms = book.terms
        before, after = self._settlement(book), self._path_after(spec, book, demand)
        for level in reversed(levels(spec.cohort)):
            if any(above_zero(minus(after.over_limit[level], before.over_limit[level]))):
                return self._cohort_limit(spec, flavor, demand, used, level, after)
        missing = above_zero(minus(after.unserved, before.unserved))
        if any(missing) and verdict is QuotaVerdict.BORROWING:

            def no_lender() -> tuple[str, dict[str, int | str]]:
                shown = _fmt(terms.resources(missing))
                wanted = _fmt(terms.resources(demand))
                return f"it needs {wanted} and no lender has room for {shown} of it", {
                    "missing": shown
                }

            return QuotaCheck(
                QuotaVerdict.NO_LENDER,
                explain=self._explaining(terms, spec, flavor, demand, used, no_lender),
            )
        return QuotaCheck(verdict, explain=self._explaining(terms, spec, flavor, demand, used))

    def _cohort_limit(
        self,
        spec: TeamSpec,
        flavor: FlavorName,
        demand: Amounts,
        used: Amounts,
        path: CohortPath,
        after: PathSettlement,
    ) -> QuotaCheck:
        terms = self._book(flavor).terms
        wanted = plus(after.need[path], after.over_limit[path])

        def over_cohort_limit() -> tuple[str, dict[str, int | str]]:
            quota = self.tree.quota(path, flavor)
            limit = quota.borrow_limit if quota is not None else Resources()
            name = "/".join(path)
            return (
                f"cohort {name} would take {_fmt(terms.resources(wanted))} from outside it, "
                f"over its borrow limit of {_fmt(limit) or 'nothing'}",
                {"cohort": name},
            )

        return QuotaCheck(
            QuotaVerdict.BORROW_LIMIT,
            explain=self._explaining(terms, spec, flavor, demand, used, over_cohort_limit),
        )

    def _explaining(
        self,
        terms: FlavorTerms,
        spec: TeamSpec,
        flavor: FlavorName,
        demand: Amounts,
        used: Amounts,
        why: Callable[[], tuple[str, dict[str, int | str]]] | None = None,
    ) -> Callable[[], tuple[str, Mapping[str, int | str]]]:
        """A check's ``explain``: ``team T uses …`` of a team that used ``used`` of the flavor
        and asked for ``demand``, then what ``why()`` adds (the rest of the message, more
        numbers), all worked out when first read from these values, which never change."""

        def explain() -> tuple[str, Mapping[str, int | str]]:
            message = f"team {spec.name} {self._described(terms, spec, flavor, used)}"
            numbers = _numbers(terms, spec.name, flavor, demand, used)
            if why is None:
                return message, numbers
            rest, more = why()
            return f"{message}; {rest}", numbers | more

        return explain

    def describe(self, team: TeamName, flavor: FlavorName) -> str:
        """``uses 64/64 nvidia.com/gpu of its p5.48xlarge guarantee and 32/32 borrowed``."""
        book = self._book(flavor)
        spec = self.policy.by_team.get(team)
        used = book.used.get(team, book.terms.zero)
        return _described_as(book.terms, team, spec, flavor, used)

    def _described(
        self, terms: FlavorTerms, spec: TeamSpec, flavor: FlavorName, used: Amounts
    ) -> str:
        return _described_as(terms, spec.name, spec, flavor, used)


def _described_as(
    terms: FlavorTerms, team: TeamName, spec: TeamSpec | None, flavor: FlavorName, used: Amounts
) -> str:
    """``QuotaBook.describe`` of a team using ``used`` of the flavor."""
    name, had, given = _headline(terms, team, used, None)
    gpus = name == NVIDIA_GPU and terms.gpu is not None

    def shown(value: int) -> int | str:
        return shown_gpus(value) if gpus else value

    text = f"uses {shown(min(had, given))}/{shown(given)} {name} of its {flavor} guarantee"
    if spec is not None and spec.sharing.borrows:
        limit = _amount_of(terms, terms.borrow_limit[team], name)
        text += f" and {shown(max(had - given, 0))}/{shown(limit)} borrowed"
    return text


def _numbers(
    terms: FlavorTerms, team: TeamName, flavor: FlavorName, demand: Amounts, used: Amounts
) -> dict[str, int | str]:
    name, had, given = _headline(terms, team, used, demand)
    asked, borrowed = _amount_of(terms, demand, name), max(had - given, 0)
    if name == NVIDIA_GPU and terms.gpu is not None:  # kept in thousandths
        return {
            "flavor": str(flavor),
            "resource": name,
            "requested": shown_gpus(asked),
            "used": shown_gpus(had),
            "guarantee": shown_gpus(given),
            "borrowed": shown_gpus(borrowed),
        }
    return {
        "flavor": str(flavor),
        "resource": name,
        "requested": asked,
        "used": had,
        "guarantee": given,
        "borrowed": borrowed,
    }


def _headline(
    terms: FlavorTerms, team: TeamName, used: Amounts, demand: Amounts | None
) -> tuple[str, int, int]:
    """The resource a message leads with — of the team's guarantee, else of ``demand`` (of its
    usage ``used`` when None) — and what the team uses and is guaranteed of it."""
    guarantee = terms.guarantee.get(team, terms.zero)
    shown = guarantee if any(guarantee) else used if demand is None else demand
    name = _headline_in(terms.names, shown)
    return name, _amount_of(terms, used, name), _amount_of(terms, guarantee, name)


def _need(book: _FlavorBook, team: TeamName, used: Amounts) -> Amounts:
    """What a team using ``used`` borrows: its usage above its guarantee."""
    return above_zero(minus(used, book.terms.guarantee.get(team, book.terms.zero)))


def _cohort_need(book: _FlavorBook, path: CohortPath) -> Amounts:
    """What the cohort's subtree uses above its subtree's guarantee."""
    zero = book.terms.zero
    used = book.cohort_used.get(path, zero)
    return above_zero(minus(used, book.terms.subtree.get(path, zero)))


def _offer(book: _FlavorBook, team: TeamName, used: Amounts) -> Amounts:
    """What a team using ``used`` lends: its unused guarantee, within its lending limit."""
    terms = book.terms
    if not terms.lends.get(team, False):
        return terms.zero
    unused = above_zero(minus(terms.guarantee[team], used))
    limit = terms.lending_limit[team]
    return unused if limit is None else smaller(unused, limit)


def _covered_amounts(terms: FlavorTerms, resources: Resources) -> Amounts | None:
    """``resources`` in the terms' order (a flavor not counted too, as its guarantees read),
    or None when they name a resource the terms do not cover."""
    if not resources.keys() <= terms.column.keys():
        return None
    return terms.quota_amounts(resources)


_ACTIVE_GUARANTEED: dict[int, tuple[FlavorTerms, Amounts]] = {}
"""What the active teams are guaranteed together, per flavor's terms (by identity; each entry
keeps its terms alive, so an identity is never reused while it is here)."""
_MAX_ACTIVE_GUARANTEED = 64


def _active_guaranteed(policy: ClusterPolicy, terms: FlavorTerms) -> Amounts:
    """The active teams' guarantees of the flavor summed (``terms`` being ``policy``'s)."""
    known = _ACTIVE_GUARANTEED.get(id(terms))
    if known is not None and known[0] is terms:
        return known[1]
    summed = total((terms.guarantee[team.name] for team in policy.teams if team.active), terms.zero)
    if len(_ACTIVE_GUARANTEED) >= _MAX_ACTIVE_GUARANTEED:
        _ACTIVE_GUARANTEED.clear()
    _ACTIVE_GUARANTEED[id(terms)] = (terms, summed)
    return summed


def _amount_of(terms: FlavorTerms, amounts: Amounts, name: str) -> int:
    column = terms.column.get(name)
    return amounts[column] if column is not None else 0


_HEADLINE_ORDER = ("nvidia.com/gpu", "aws.amazon.com/neurondevice", "cpu", "memory")


def _headline_in(names: tuple[str, ...], amounts: Amounts) -> str:
    """The resource a message leads with: accelerators first, then the first in order of
    those the amounts name."""
    named = [name for name, value in zip(names, amounts, strict=True) if value]
    for name in _HEADLINE_ORDER:
        if name in named:
            return name
    return named[0] if named else "nvidia.com/gpu"


def _fmt(resources: Resources) -> str:
    """``16 nvidia.com/gpu, 180 cpu, 1.85Ti memory``: accelerators first, readable units, a
    share of a GPU as part of ``nvidia.com/gpu`` (``2.5 nvidia.com/gpu``)."""
    return ", ".join(readable_of(resources, name) for name in shown_names(resources))


def shown_gpus(milli: int) -> int | str:
    """GPUs kept in thousandths as users read them: a whole number as an int (``3``), a part
    of one as a decimal (``"3.5"``)."""
    whole, part = divmod(milli, GPU_MILLI_PER_GPU)
    return gpus_text(whole, part) if part else whole


def shown_names(resources: Iterable[str]) -> list[str]:
    """``accelerators_first`` of the names, a share of a GPU shown as ``nvidia.com/gpu``."""
    names = set(resources)
    if GPU_SHARE in names:
        names = (names - {GPU_SHARE}) | {NVIDIA_GPU}
    return accelerators_first(names)


def readable_of(resources: Resources, name: str) -> str:
    """``readable_amount`` of ``resources``' ``name``; GPUs with a share of one counted in
    (``2.5 nvidia.com/gpu``)."""
    if name == NVIDIA_GPU and GPU_SHARE in resources:
        return f"{gpus_text(resources.amount(NVIDIA_GPU), resources.amount(GPU_SHARE))} {name}"
    return readable_amount(name, resources.amount(name))


def dominant_share(book: QuotaBook, team: TeamName) -> float:
    """The team's largest borrowed fraction of any covered resource of any flavor, divided by
    its fair-share weight (a team that borrows nothing has share 0; weight 0 sorts last)."""
    spec = book.policy.by_team.get(team)
    largest = borrowed_fraction(book, team)
    return _weighted(largest, spec.fair_share_weight if spec is not None else 0)


def borrowed_fraction(book: QuotaBook, team: TeamName) -> float:
    """The largest fraction of any covered resource of any flavor the team holds above its
    guarantee (unweighted; 0 when it borrows nothing); a share of a GPU counts as its part of
    one of the flavor's GPUs."""
    return _largest_fraction(
        book, lambda figures: _need(figures, team, figures.used.get(team, figures.terms.zero))
    )


def cohort_shares(book: QuotaBook, team: TeamName) -> tuple[float, ...]:
    """Where the team's cohorts stand under fair share, level by level from the top: the
    weighted share of each cohort on its path (what its subtree uses above its subtree's
    guarantee, as :func:`dominant_share` measures a team). The ordering puts the team's own
    position (``core.fair_share.fair_share_position``) after them: compared as a tuple,
    cohorts compete with their siblings first, then teams inside them."""
    spec = book.policy.by_team.get(team)
    path = spec.cohort if spec is not None else ()
    return tuple(book.cohort_share(level) for level in levels(path))


def _largest_fraction(book: QuotaBook, borrowed: Callable[[_FlavorBook], Amounts]) -> float:
    """The largest fraction of a flavor's capacity ``borrowed`` gives of any covered resource
    of any flavor (GPUs in thousandths of both: the same fraction as in whole GPUs)."""
    largest = 0.0
    for flavor in book.capacity:
        figures = book._book(flavor)
        for amount, whole in zip(borrowed(figures), figures.capacity, strict=True):
            if amount > 0 and whole > 0:
                largest = max(largest, amount / whole)
    return largest


def _weighted(largest: float, weight: int) -> float:
    if largest == 0.0:
        return 0.0
    return largest / weight if weight > 0 else float("inf")


def free_to_borrow(book: QuotaBook, team: TeamName, flavor: FlavorName) -> Resources:
    """How much of each covered resource ``team`` could borrow now beyond its guarantee if its
    borrow limit allowed any amount: what lenders and idle capacity could still back once its
    own guarantee is used up. Read from the books (as if the flavor's whole capacity were
    charged to it: how much of the new borrowing would stay unbacked). Memoized on the books
    while they stand (``QuotaBook.memo``): each diagnosed wait of the team asks."""
    key = ("free-to-borrow", team, flavor)
    known = book.memo.get(key)
    if isinstance(known, Resources):
        return known
    figures = book._book(flavor)
    terms = figures.terms
    used = figures.used.get(team, terms.zero)
    whole = figures.capacity  # the flavor's covered capacity, charged to the team
    more = above_zero(minus(_need(figures, team, plus(used, whole)), _need(figures, team, used)))
    short = terms.amounts(book.shortfall_if_charged(team, flavor, terms.resources(whole)))
    found = book.memo[key] = terms.resources(above_zero(minus(more, short)))
    return found
