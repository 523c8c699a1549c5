"""Dependencies in the cycle when the upstream job is not among the snapshot's jobs (the
controller's case: it reads only unfinished jobs) but its phase is in ``upstream_phases``."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.cycle import JobsByPhase, Snapshot, schedule
from topoq.core.dependencies import (
    absent_upstream,
    dependency_cycle,
    dependency_status,
    resolve_dependencies,
)
from topoq.core.tree import build_tree
from topoq.domain.decisions import PendingReason
from topoq.domain.job import (
    Dependency,
    DependencyKind,
    DependencyStatus,
    JobId,
    JobPhase,
    JobView,
)
from topoq.testing.governance import gpu_cluster, job, policy, team

OK, ANY, FAILED = DependencyKind.AFTER_OK, DependencyKind.AFTER_ANY, DependencyKind.AFTER_FAILED
P = JobPhase


def after(kind: DependencyKind, upstream: str = "prep") -> tuple[Dependency, ...]:
    return (Dependency(kind, JobId(upstream)),)


def snapshot_of(*jobs: object, upstream: dict[str, JobPhase]) -> Snapshot:
    nodes, spec = gpu_cluster([1, 2, 4])
    return Snapshot(
        0.0,
        build_tree(nodes, spec),
        tuple(jobs),  # type: ignore[arg-type]
        policy(team("a", 64)),
        upstream_phases={JobId(k): v for k, v in upstream.items()},
    )


@pytest.mark.parametrize(
    ("kind", "ended", "admitted"),
    [
        (OK, P.SUCCEEDED, True),
        (OK, P.FAILED, False),
        (OK, P.CANCELLED, False),
        (FAILED, P.FAILED, True),
        (FAILED, P.SUCCEEDED, False),
        (ANY, P.SUCCEEDED, True),
        (ANY, P.FAILED, True),
        (ANY, P.CANCELLED, True),
    ],
)
def test_a_finished_upstream_job_outside_the_snapshot_decides_the_dependent(
    kind: DependencyKind, ended: JobPhase, admitted: bool
) -> None:
    result = schedule(
        snapshot_of(job("next", "a", 1, depends=after(kind)), upstream={"prep": ended})
    )
    assert [a.job for a in result.admissions] == (["next"] if admitted else [])
    if not admitted:
        [cancel] = result.cancellations
        assert cancel.job == "next"
        assert cancel.message.startswith(f"dependency {kind.value} prep: it ended {ended.value}")


def test_an_unfinished_upstream_phase_outside_the_snapshot_keeps_the_dependent_waiting() -> None:
    result = schedule(
        snapshot_of(job("next", "a", 1, depends=after(OK)), upstream={"prep": P.RUNNING})
    )
    assert not result.admissions and not result.cancellations
    [diagnostic] = result.diagnostics
    assert diagnostic.reason is PendingReason.WAITING_ON_DEPENDENCY
    assert diagnostic.message == "waiting on after-ok prep"


def test_an_id_neither_in_the_snapshot_nor_in_upstream_phases_cancels_as_no_such_job() -> None:
    result = schedule(snapshot_of(job("next", "a", 1, depends=after(OK, "ghost")), upstream={}))
    [cancel] = result.cancellations
    assert cancel.message == "dependency after-ok ghost: no such job"


def test_a_job_in_the_snapshot_wins_over_upstream_phases() -> None:
    prep = job("prep", "a", 1)  # pending in the snapshot
    state = resolve_dependencies(
        [prep, job("next", "a", 1, depends=after(OK))], {JobId("prep"): P.SUCCEEDED}
    )
    assert state.blocked == {"next"} and not state.cancellations


def test_the_dependent_is_admitted_once_every_dependency_is_met() -> None:
    deps = (Dependency(OK, JobId("prep")), Dependency(ANY, JobId("eval")))
    waiting = schedule(
        snapshot_of(
            job("next", "a", 1, depends=deps), upstream={"prep": P.SUCCEEDED, "eval": P.RUNNING}
        )
    )
    assert [d.message for d in waiting.diagnostics] == ["waiting on after-any eval"]
    met = schedule(
        snapshot_of(
            job("next", "a", 1, depends=deps), upstream={"prep": P.SUCCEEDED, "eval": P.FAILED}
        )
    )
    assert [a.job for a in met.admissions] == ["next"]


def test_the_same_snapshot_gives_the_same_result_with_upstream_phases() -> None:
    snapshot = snapshot_of(job("next", "a", 1, depends=after(OK)), upstream={"prep": P.FAILED})
    assert schedule(snapshot) == schedule(snapshot)


def test_absent_upstream_names_only_ids_pending_jobs_need_from_outside() -> None:
    running = job("prep", "a", 1)
    jobs = [
        running,
        job("a", "a", 1, depends=(Dependency(OK, JobId("prep")), Dependency(ANY, JobId("old")))),
        job("b", "a", 1, depends=after(FAILED, "older")),
    ]
    assert absent_upstream(jobs) == {"old", "older"}
    assert absent_upstream([running]) == frozenset()
    # sorted out by the shell already (the controller's step): the same ids
    assert absent_upstream(jobs, JobsByPhase(jobs).dependents) == {"old", "older"}
    assert absent_upstream(jobs, ()) == frozenset()


@pytest.mark.parametrize(
    ("kind", "phase", "status"),
    [
        (OK, None, DependencyStatus.BROKEN),
        (OK, P.PENDING, DependencyStatus.OPEN),
        (OK, P.PREEMPTING, DependencyStatus.OPEN),
        (OK, P.SUCCEEDED, DependencyStatus.MET),
        (FAILED, P.SUCCEEDED, DependencyStatus.BROKEN),
        (FAILED, P.FAILED, DependencyStatus.MET),
        (ANY, P.CANCELLED, DependencyStatus.MET),
    ],
)
def test_dependency_status_follows_the_kind_and_the_upstream_phase(
    kind: DependencyKind, phase: JobPhase | None, status: DependencyStatus
) -> None:
    assert dependency_status(Dependency(kind, JobId("prep")), phase) is status


def test_dependency_cycle_finds_self_dependency_and_longer_cycles() -> None:
    a, b, c = JobId("a"), JobId("b"), JobId("c")
    assert dependency_cycle({a: [a]}) == (a, a)
    assert dependency_cycle({a: [b], b: [c], c: [a]}) == (a, b, c, a)
    assert dependency_cycle({c: [b], b: [c], a: [b]}) == (b, c, b)


def test_dependency_cycle_is_none_for_chains_diamonds_and_outside_ids() -> None:
    a, b, c, d = JobId("a"), JobId("b"), JobId("c"), JobId("d")
    assert dependency_cycle({a: [b, c], b: [d], c: [d], d: []}) is None
    assert dependency_cycle({a: [JobId("stored-earlier")]}) is None
    assert dependency_cycle({}) is None


NAMES = [f"j{n}" for n in range(6)]


@st.composite
def job_sets(draw: st.DrawFn) -> list[JobView]:
    """Jobs in any phase, each pending one depending on any others (or unknown ids)."""
    jobs = []
    for name in draw(st.lists(st.sampled_from(NAMES), min_size=1, unique=True)):
        upstream = draw(st.lists(st.sampled_from([*NAMES, "ghost"]), max_size=3, unique=True))
        kinds = draw(st.lists(st.sampled_from(list(DependencyKind)), min_size=3, max_size=3))
        deps = tuple(Dependency(k, JobId(u)) for k, u in zip(kinds, upstream, strict=False))
        view = job(name, "a", 1, depends=deps)
        jobs.append(replace(view, phase=draw(st.sampled_from(list(JobPhase)))))
    return jobs


@given(job_sets())
@settings(max_examples=200, deadline=None)
def test_unfinished_jobs_with_upstream_phases_resolve_as_every_job_does(
    jobs: list[JobView],
) -> None:
    """What the controller gives the cycle (unfinished jobs and the phases of the absent
    upstream jobs it reads) decides as what the simulator gives it (every job)."""
    unfinished = [view for view in jobs if not view.phase.finished]
    stored = {view.id: view.phase for view in jobs}
    read = {job: stored[job] for job in absent_upstream(unfinished) if job in stored}
    assert resolve_dependencies(unfinished, read) == resolve_dependencies(jobs)
