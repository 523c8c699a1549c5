"""A wait for quota with its numbers — what the team uses, is guaranteed and may borrow, what
its pool could still lend — and the smallest changes that would admit the job now: a borrow
limit of N, a guarantee of N, or named running jobs whose end frees enough. Each change is
offered only if the job would then pass the quota check: a limit is tried on the books' own
figures (``QuotaBook.admits_with_quota``, no changed policy made), an ended job on a copy of
the books."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from itertools import islice

from topoq.core.quota import QuotaBook, QuotaVerdict, free_to_borrow, positive
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy, FlavorName, FlavorQuota, TeamName
from topoq.domain.job import JobView
from topoq.domain.lint import accelerators_first, readable_amount
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
        of it, the most of ``headline`` first (then by id)."""
        key = (flavor, headline, team)
        found = self._users.get(key)
        if found is None:
            if team is None:
                found = [
                    (job, job.allocation.usage[flavor])  # type: ignore[union-attr]
                    for job in self._jobs
                    if flavor in job.allocation.usage  # type: ignore[union-attr]
                ]
                found.sort(key=lambda use: (-use[1].amount(headline), use[0].id))
            else:
                found = [use for use in self.users(flavor, headline, None) if use[0].team == team]
            self._users[key] = found
        return found


_Use = tuple[JobView, Resources]
"""A running job and what it uses of a flavor."""


def quota_numbers(
    book: QuotaBook, team: TeamName, flavor: FlavorName, demand: Resources
) -> dict[str, int | str]:
    """The headline resource (accelerators first) as plain numbers, each other covered
    resource the job asks for as one line."""
    asked = book.covered(flavor, demand)
    names = accelerators_first(set(asked) | set(book.guarantee(team, flavor))) or [NVIDIA_GPU]
    limit = _borrow_limit(book, team, flavor)
    free = free_to_borrow(book, team, flavor)
    used = book.covered(flavor, book.used(team, flavor))
    guarantee, borrowed = book.guarantee(team, flavor), book.borrowed(team, flavor)
    headline = names[0]
    numbers: dict[str, int | str] = {
        "flavor": str(flavor),
        "resource": headline,
        "requested": asked.amount(headline),
        "used": used.amount(headline),
        "guarantee": guarantee.amount(headline),
        "borrowed": borrowed.amount(headline),
        "borrow_limit": limit.amount(headline),
        "free_to_lend": free.amount(headline),
    }
    for name in names[1:]:
        if asked.amount(name):
            figures = (
                ("requested", asked),
                ("used", used),
                ("guarantee", guarantee),
                ("borrowed", borrowed),
                ("borrow limit", limit),
                ("free to lend", free),
            )
            numbers[name] = ", ".join(
                f"{label} {readable_amount(name, amounts.amount(name))}"
                for label, amounts in figures
            )
    return numbers


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
    asked = book.covered(flavor, demand)
    after = book.covered(flavor, book.used(team, flavor)) + asked
    guarantee = book.guarantee(team, flavor)
    limit = _borrow_limit(book, team, flavor)
    found: list[str] = []
    if verdict is QuotaVerdict.BORROW_LIMIT:
        needed = _raised(limit, positive(after - guarantee))
        if _admits_with_quota(book, job, flavor, asked, borrow_limit=needed):
            found.append(f"raise {team}'s borrow limit on {flavor} to {_amounts(needed, limit)}")
    if verdict in (QuotaVerdict.BORROW_LIMIT, QuotaVerdict.NO_QUOTA):
        needed = _raised(guarantee, positive(after - limit))
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
    headline = (accelerators_first(demand) or [NVIDIA_GPU])[0]
    anyone = verdict is QuotaVerdict.NO_LENDER
    work = running if isinstance(running, RunningWork) else RunningWork(running)
    users = work.users(flavor, headline, None if anyone else job.team)
    largest = list(islice((use for use in users if use[0].id != job.id), MAX_JOBS_TRIED))
    trial, chosen, freed = book, [], Resources()
    gap = _gap(trial, job, flavor, demand, verdict)
    for other, used in largest:
        usage = book.covered(flavor, used)
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
) -> int:
    """How far the job is from passing (summed over resources): what lenders cannot back, or
    what the team's use would exceed."""
    if verdict is QuotaVerdict.NO_LENDER:
        return sum(book.shortfall_if_charged(job.team, flavor, demand).values())
    after = book.covered(flavor, book.used(job.team, flavor)) + demand
    ceiling = book.guarantee(job.team, flavor) + _borrow_limit(book, job.team, flavor)
    return sum(positive(after - ceiling).values())


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
    None), accelerators first."""
    names = [
        name
        for name in accelerators_first(resources)
        if before is None or resources.amount(name) != before.amount(name)
    ]
    return ", ".join(readable_amount(name, resources.amount(name)) for name in names)
