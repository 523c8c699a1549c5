"""A wait for quota with its numbers — what the team uses, is guaranteed and may borrow, what
its pool could still lend — and the smallest changes that would admit the job now: a borrow
limit of N, a guarantee of N, or named running jobs whose end frees enough. Each change is
offered only if the job would then pass the quota check: a limit is tried on the books' own
figures (``QuotaBook.admits_with_quota``, no changed policy made), an ended job on a copy of
the books.

A share of a GPU counts as its part of ``nvidia.com/gpu`` here as in the books: the figures
are read in the books' units (``FlavorTerms``: GPUs in thousandths), shown in GPUs (``3.5``),
and a changed quota is always whole GPUs, rounded up (quotas are whole GPUs)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from fractions import Fraction
from itertools import islice

from topoq.core.quota import (
    QuotaBook,
    QuotaVerdict,
    free_to_borrow,
    readable_of,
    shown_gpus,
    shown_names,
)
from topoq.core.quota_terms import Amounts, FlavorTerms, above_zero, minus, plus
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, FlavorName, FlavorQuota, TeamName
from topoq.domain.gpu_share import GPU_MILLI_PER_GPU, GPU_SHARE
from topoq.domain.job import JobView
from topoq.domain.lint import readable_amount
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources

MAX_JOBS_TRIED = 16
"""Running jobs considered, largest first, when looking for the ones to wait for."""
MAX_JOBS_NAMED = 8
"""More jobs than this to wait for is no remedy worth naming."""


class RunningWork:
    """The running jobs a wait may name, and the users of each flavor, largest first, worked
    out once: a cycle's jobs with an allocation are the same from its start to its end (the
    jobs it admits have none yet), so every diagnosis of the cycle reads the same lists."""

    def __init__(self, jobs: Iterable[JobView]) -> None:
        self._jobs = [job for job in jobs if job.allocation is not None]
        self._users: dict[tuple[FlavorName, str, TeamName | None], list[_Use]] = {}

    def users(self, flavor: FlavorName, headline: str, team: TeamName | None) -> list[_Use]:
        """The jobs (of ``team``; None: of every team) that use ``flavor``, with what they use
        of it, the most of ``headline`` first (then by id; GPUs with shares counted in)."""
        key = (flavor, headline, team)
        found = self._users.get(key)
        if found is None:
            if team is None:
                found = [
                    (job, job.allocation.usage[flavor])  # type: ignore[union-attr]
                    for job in self._jobs
                    if flavor in job.allocation.usage  # type: ignore[union-attr]
                ]
                found.sort(key=lambda use: (-_much(use[1], headline), use[0].id))
            else:
                found = [use for use in self.users(flavor, headline, None) if use[0].team == team]
            self._users[key] = found
        return found


_Use = tuple[JobView, Resources]
"""A running job and what it uses of a flavor."""


def _much(resources: Resources, name: str) -> int:
    """How much of ``name`` ``resources`` holds, GPUs in thousandths with shares counted."""
    if name == NVIDIA_GPU:
        return resources.amount(NVIDIA_GPU) * GPU_MILLI_PER_GPU + resources.amount(GPU_SHARE)
    return resources.amount(name)


def quota_numbers(
    book: QuotaBook, team: TeamName, flavor: FlavorName, demand: Resources
) -> dict[str, int | str]:
    """The headline resource (accelerators first) as plain numbers, each other covered
    resource the job asks for as one line (GPUs in GPUs, a share of one as a decimal)."""
    terms = book.terms(flavor)
    asked = terms.amounts(demand)
    guarantee = terms.quota_amounts(book.guarantee(team, flavor))
    named = [
        name
        for name, wanted, given in zip(terms.names, asked, guarantee, strict=True)
        if wanted or given
    ]
    names = shown_names(named) or [NVIDIA_GPU]
    limit = terms.quota_amounts(_borrow_limit(book, team, flavor))
    free = terms.amounts(free_to_borrow(book, team, flavor))
    used = terms.amounts(book.used(team, flavor))
    borrowed = terms.amounts(book.borrowed(team, flavor))
    headline = names[0]
    numbers: dict[str, int | str] = {
        "flavor": str(flavor),
        "resource": headline,
        "requested": _number(terms, asked, headline),
        "used": _number(terms, used, headline),
        "guarantee": _number(terms, guarantee, headline),
        "borrowed": _number(terms, borrowed, headline),
        "borrow_limit": _number(terms, limit, headline),
        "free_to_lend": _number(terms, free, headline),
    }
    for name in names[1:]:
        if _number(terms, asked, name):
            figures = (
                ("requested", asked),
                ("used", used),
                ("guarantee", guarantee),
                ("borrowed", borrowed),
                ("borrow limit", limit),
                ("free to lend", free),
            )
            numbers[name] = ", ".join(
                f"{label} {_readable(terms, amounts, name)}" for label, amounts in figures
            )
    return numbers


def _number(terms: FlavorTerms, amounts: Amounts, name: str) -> int | str:
    """``name``'s amount as the numbers show it (GPUs kept in thousandths in GPUs)."""
    column = terms.column.get(name)
    if column is None:
        return 0
    return shown_gpus(amounts[column]) if column == terms.gpu else amounts[column]


def _readable(terms: FlavorTerms, amounts: Amounts, name: str) -> str:
    number = _number(terms, amounts, name)
    return f"{number} {name}" if isinstance(number, str) else readable_amount(name, number)


def quota_remedies(
    book: QuotaBook,
    job: JobView,
    flavor: FlavorName,
    demand: Resources,
    verdict: QuotaVerdict,
    running: Iterable[JobView] | RunningWork,
) -> tuple[str, ...]:
    """The smallest changes that would let ``job`` pass the quota check now, smallest first.
    Memoized on the books (``QuotaBook.memo``, cleared by every change): the answer depends on
    the job's team, flavor, demand and verdict, the books and the running jobs — which change
    only with the books — so the jobs of a team that wait alike between two admissions share
    it."""
    key = ("quota-remedies", job.team, flavor, demand, verdict)
    known = book.memo.get(key)
    if isinstance(known, tuple):
        return known
    team = job.team
    spec = book.policy.by_team.get(team)
    if spec is None:
        return ()
    terms = book.terms(flavor)
    asked = terms.covered(demand)
    after = plus(terms.amounts(book.used(team, flavor)), terms.amounts(asked))
    guarantee = book.guarantee(team, flavor)
    limit = _borrow_limit(book, team, flavor)
    found: list[str] = []
    if verdict is QuotaVerdict.BORROW_LIMIT:
        needed = _raised(limit, _whole(terms, minus(after, terms.quota_amounts(guarantee))))
        if _admits_with_quota(book, job, flavor, asked, borrow_limit=needed):
            found.append(f"raise {team}'s borrow limit on {flavor} to {_amounts(needed, limit)}")
    if verdict in (QuotaVerdict.BORROW_LIMIT, QuotaVerdict.NO_QUOTA):
        needed = _raised(guarantee, _whole(terms, minus(after, terms.quota_amounts(limit))))
        if _admits_with_quota(book, job, flavor, asked, guarantee=needed):
            found.append(f"raise {team}'s guarantee on {flavor} to {_amounts(needed, guarantee)}")
    waited = jobs_to_wait_for(book, job, flavor, asked, verdict, running)
    if waited is not None:
        ended, freed = waited
        names = ", ".join(str(other.id) for other in ended)
        found.append(f"wait for {names} to end (they free {_amounts(freed)})")
    book.memo[key] = remedies = tuple(found)
    return remedies


def jobs_to_wait_for(
    book: QuotaBook,
    job: JobView,
    flavor: FlavorName,
    demand: Resources,
    verdict: QuotaVerdict,
    running: Iterable[JobView] | RunningWork,
) -> tuple[list[JobView], Resources] | None:
    """Running jobs whose end would admit ``job``, largest first, each one taken only if it
    brings the job closer: the team's own jobs for a guarantee or a borrow limit, any job of
    the flavor when lenders lack room. None when ``MAX_JOBS_NAMED`` do not suffice."""
    headline = (shown_names(demand) or [NVIDIA_GPU])[0]
    anyone = verdict is QuotaVerdict.NO_LENDER
    work = running if isinstance(running, RunningWork) else RunningWork(running)
    users = work.users(flavor, headline, None if anyone else job.team)
    largest = list(islice((use for use in users if use[0].id != job.id), MAX_JOBS_TRIED))
    trial, chosen, freed = book, [], Resources()
    gap = _gap(trial, job, flavor, demand, verdict)
    terms = book.terms(flavor)
    for other, used in largest:
        usage = terms.covered(used)
        attempt = trial.copy()
        attempt.release(other.team, flavor, usage)
        narrower = _gap(attempt, job, flavor, demand, verdict)
        if narrower >= gap:
            continue
        trial, gap, freed = attempt, narrower, freed + usage
        chosen.append(other)
        if trial.check(job.team, flavor, demand).verdict.admissible:
            return chosen, freed
        if len(chosen) >= MAX_JOBS_NAMED:
            return None
    return None


def _gap(
    book: QuotaBook, job: JobView, flavor: FlavorName, demand: Resources, verdict: QuotaVerdict
) -> Fraction:
    """How far the job is from passing (summed over resources, GPUs in GPUs): what lenders
    cannot back, or what the team's use would exceed."""
    terms = book.terms(flavor)
    if verdict is QuotaVerdict.NO_LENDER:
        short = terms.amounts(book.shortfall_if_charged(job.team, flavor, demand))
        return _summed(terms, short)
    after = plus(terms.amounts(book.used(job.team, flavor)), terms.amounts(demand))
    quota = book.guarantee(job.team, flavor) + _borrow_limit(book, job.team, flavor)
    return _summed(terms, above_zero(minus(after, terms.quota_amounts(quota))))


def _summed(terms: FlavorTerms, amounts: Amounts) -> Fraction:
    """The amounts summed, GPUs (kept in thousandths) in GPUs."""
    return sum(
        (
            Fraction(value, GPU_MILLI_PER_GPU) if column == terms.gpu else Fraction(value)
            for column, value in enumerate(amounts)
        ),
        Fraction(0),
    )


def _whole(terms: FlavorTerms, amounts: Amounts) -> Resources:
    """The positive part of ``amounts`` as a quota: GPUs (kept in thousandths) rounded up to
    whole GPUs."""
    gpu = terms.gpu
    return Resources(
        {
            name: -(-value // GPU_MILLI_PER_GPU) if column == gpu else value
            for column, (name, value) in enumerate(zip(terms.names, amounts, strict=True))
            if value > 0
        }
    )


def _borrow_limit(book: QuotaBook, team: TeamName, flavor: FlavorName) -> Resources:
    spec = book.policy.by_team.get(team)
    quota = spec.quota_for(flavor) if spec is not None else None
    if spec is None or quota is None or not spec.sharing.borrows:
        return Resources()
    return quota.borrow_limit


def _raised(current: Resources, wanted: Resources) -> Resources:
    """``current`` with each resource of ``wanted`` raised to at least that amount."""
    names = set(current) | set(wanted)
    return Resources({n: max(current.amount(n), wanted.amount(n)) for n in names})


def _with_quota(
    policy: ClusterPolicy,
    team: TeamName,
    flavor: FlavorName,
    *,
    guarantee: Resources | None = None,
    borrow_limit: Resources | None = None,
) -> ClusterPolicy | None:
    """The policy with one team's quota on ``flavor`` changed; None if that is no policy."""
    spec = policy.by_team[team]
    quota = spec.quota_for(flavor) or FlavorQuota(flavor, Resources())
    changed = replace(
        quota,
        guarantee=quota.guarantee if guarantee is None else guarantee,
        borrow_limit=quota.borrow_limit if borrow_limit is None else borrow_limit,
    )
    others = tuple(q for q in spec.quotas if q.flavor != flavor)
    teams = tuple(
        replace(spec, quotas=(*others, changed)) if other.name == team else other
        for other in policy.teams
    )
    try:
        return replace(policy, teams=teams)
    except InvalidInputError:
        return None


def _admits_with_quota(
    book: QuotaBook,
    job: JobView,
    flavor: FlavorName,
    demand: Resources,
    *,
    guarantee: Resources | None = None,
    borrow_limit: Resources | None = None,
) -> bool:
    """Whether the job would pass the quota check if its team's quota of ``flavor`` had this
    guarantee or borrow limit (the other as it is), and that policy guaranteed no more than
    the flavor has (else it is no policy to advise): ``_admits`` of ``_with_quota``, answered
    on the books' figures. A policy is made only when an amount names a resource no quota of
    the flavor covers (never for the remedies' amounts: they are read from covered figures).
    ``_with_quota`` never finds that policy invalid (it keeps the teams, their names,
    cohorts and flavors, all that a policy's validation looks at), so neither does this."""
    quota = book.policy.by_team[job.team].quota_for(flavor)
    given = guarantee if guarantee is not None else book.guarantee(job.team, flavor)
    limit = borrow_limit if borrow_limit is not None else Resources()
    if borrow_limit is None and quota is not None:
        limit = quota.borrow_limit  # the quota's, whether or not the team may borrow
    fits = book.guarantees_fit_with(job.team, flavor, given)
    admits = fits and book.admits_with_quota(
        job.team, flavor, demand, guarantee=given, borrow_limit=limit
    )
    if admits is None:
        changed = _with_quota(
            book.policy, job.team, flavor, guarantee=guarantee, borrow_limit=borrow_limit
        )
        return _admits(book, changed, job, flavor, demand)
    return admits


def _admits(
    book: QuotaBook,
    policy: ClusterPolicy | None,
    job: JobView,
    flavor: FlavorName,
    demand: Resources,
) -> bool:
    if policy is None:
        return False
    trial = book.under(policy, job.team, flavor)  # the policy differs in this quota alone
    guaranteed = Resources()
    for team in policy.teams:
        if team.active:
            guaranteed = guaranteed + trial.guarantee(team.name, flavor)
    capacity = trial.covered(flavor, book.capacity.get(flavor, Resources()))
    if not trial.covered(flavor, guaranteed).fits_in(capacity):
        return False  # guarantees past the flavor's capacity: no policy to advise
    return trial.check(job.team, flavor, demand).verdict.admissible


def _amounts(resources: Resources, before: Resources | None = None) -> str:
    """``48 nvidia.com/gpu, 400 cpu``: the resources that changed (all when ``before`` is
    None), accelerators first, a share of a GPU counted in (``2.5 nvidia.com/gpu``)."""
    names = [
        name
        for name in shown_names(resources)
        if before is None or _much(resources, name) != _much(before, name)
    ]
    return ", ".join(readable_of(resources, name) for name in names)
