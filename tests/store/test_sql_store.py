"""Every method of the SQL store, on SQLite and on PostgreSQL."""

from __future__ import annotations

import inspect
import time
from dataclasses import replace

import pytest

from tests.store.conftest import StoreLocation
from topoq.core.cycle import Snapshot, schedule
from topoq.core.lifecycle import advance, apply_cycle
from topoq.core.tree import build_tree
from topoq.domain.decisions import CycleResult
from topoq.domain.job import JobId, JobPhase, JobView
from topoq.engine.ports import AuditEntry, DuplicateJob, Store, UnknownJob
from topoq.store import DecisionKind, SqlStore
from topoq.store.job_counts import TEAM_COUNTS_S
from topoq.testing.governance import gpu_cluster, job, policy, team


def submit(
    store: SqlStore,
    job_id: str,
    team_name: str = "llm",
    at: float = 1.0,
    pods: int = 1,
    user: str | None = None,
) -> JobView:
    spec = replace(job(job_id, team_name, pods, at=at).spec, user=user)
    return store.add_job(spec, actor="alice", now=at)


def run_cycle(store: SqlStore, now: float) -> tuple[CycleResult, dict[JobId, JobView]]:
    """What the controller does: snapshot from the store, one cycle, one atomic save."""
    nodes, topology = gpu_cluster([1, 2, 2])
    store.save_nodes(nodes, actor="topoq", now=now)
    jobs = store.jobs()
    current = store.policy()
    assert current is not None
    result = schedule(Snapshot(now, build_tree(nodes, topology), tuple(jobs.values()), current))
    after = apply_cycle(jobs, result, now=now, start_at_once=True)
    changed = [view for job_id, view in after.items() if view != jobs[job_id]]
    store.save_jobs(changed, now=now, decisions=result)
    return result, after


def test_a_submitted_job_is_pending_with_one_history_entry(store: SqlStore) -> None:
    view = submit(store, "train-1", user="alice")
    assert view.phase is JobPhase.PENDING
    assert [(c.phase, c.cause) for c in view.history] == [(JobPhase.PENDING, "submitted")]
    assert store.job(JobId("train-1")) == view
    assert store.jobs() == {view.id: view}
    assert store.job_record(view.id).version == 1


def test_submitting_the_same_id_twice_raises_and_keeps_the_first(store: SqlStore) -> None:
    first = submit(store, "train-1", at=1.0)
    with pytest.raises(DuplicateJob, match="train-1"):
        submit(store, "train-1", at=2.0, pods=8)
    assert store.job(first.id) == first
    assert len(store.job_history(first.id)) == 1


def test_unknown_jobs_raise_unknown_job(store: SqlStore) -> None:
    for read in (store.job, store.job_history, store.diagnostic, store.job_record):
        with pytest.raises(UnknownJob, match="ghost"):
            read(JobId("ghost"))


def test_a_cycle_is_saved_and_read_back_exactly(store: SqlStore) -> None:
    store.save_policy(policy(team("llm", 16), team("vision", 16)), actor="admin", now=0.0)
    for name, team_name in (("a", "llm"), ("b", "vision"), ("c", "llm")):
        submit(store, name, team_name)
    submit(store, "too-big", "llm", pods=9)
    result, after = run_cycle(store, now=5.0)
    assert {a.job for a in result.admissions} == {"a", "b", "c"}
    assert store.jobs(include_finished=True) == after
    admitted = store.job_history(JobId("a"))
    assert [e.phase for e in admitted] == [JobPhase.PENDING, JobPhase.ADMITTED, JobPhase.RUNNING]
    assert admitted[1].allocation == after[JobId("a")].allocation
    kinds = [d.kind for d in store.decisions()]
    assert kinds.count(DecisionKind.ADMIT) == 3
    assert kinds.count(DecisionKind.DIAGNOSTIC) == 1
    assert store.diagnostic(JobId("too-big")) is not None


def test_a_waiting_job_logs_its_reason_once_not_every_cycle(store: SqlStore) -> None:
    store.save_policy(policy(team("llm", 8)), actor="admin", now=0.0)
    submit(store, "too-big", pods=9)
    for now in (1.0, 2.0, 3.0):
        run_cycle(store, now=now)
    diagnostics = store.decisions(job=JobId("too-big"))
    assert [d.kind for d in diagnostics] == [DecisionKind.DIAGNOSTIC]
    assert diagnostics[0].cycle == 1


def test_saving_appends_only_the_new_history_entries(store: SqlStore) -> None:
    view = submit(store, "j")
    held = replace(view, held=True)
    store.save_jobs([held], now=2.0)
    store.save_jobs([held], now=3.0)  # nothing new in the history
    cancelled = advance(store.job(view.id), JobPhase.CANCELLED, now=4.0, cause="by bob")
    store.save_jobs([cancelled], now=4.0)
    history = store.job_history(view.id)
    assert [(e.seq, e.phase) for e in history] == [(0, JobPhase.PENDING), (1, JobPhase.CANCELLED)]
    assert store.job(view.id) == cancelled
    assert store.jobs() == {}
    assert store.job_record(view.id).version == 4


def test_list_and_count_filter_by_team_phase_and_user(store: SqlStore) -> None:
    for i in range(6):
        submit(store, f"j{i}", "llm" if i % 2 else "vision", at=float(i), user=f"u{i % 3}")
    cancelled = advance(store.job(JobId("j5")), JobPhase.CANCELLED, now=9.0, cause="x")
    store.save_jobs([cancelled], now=9.0)
    ids = [v.id for v in store.list_jobs(team="llm")]
    assert ids == ["j5", "j3", "j1"]
    assert [v.id for v in store.list_jobs(team=["llm"], phase=JobPhase.PENDING)] == ["j3", "j1"]
    assert [v.id for v in store.list_jobs(user="u0", newest_first=False)] == ["j0", "j3"]
    assert [v.id for v in store.list_jobs(limit=2, offset=1)] == ["j4", "j3"]
    assert store.count_jobs() == 6
    assert store.count_jobs(team={"llm", "vision"}, phase={JobPhase.CANCELLED}) == 1


def test_counts_are_right_under_every_combination_of_filters(store: SqlStore) -> None:
    governance = policy(team("llm", 16), team("vision", 8), team("audio", 8))
    store.save_policy(governance, actor="admin", now=0.0)
    teams, users = ("llm", "vision", "audio"), (None, "ann", "bob")
    for i in range(18):
        submit(store, f"j{i}", teams[i % 3], at=float(i), user=users[i // 3 % 3])
    run_cycle(store, now=20.0)
    for job_id in ("j0", "j4", "j17"):
        view = store.job(JobId(job_id))
        store.save_jobs([advance(view, JobPhase.CANCELLED, now=21.0, cause="x")], now=21.0)
    stored = list(store.jobs(include_finished=True).values())
    assert {view.phase for view in stored} >= {
        JobPhase.PENDING,
        JobPhase.RUNNING,
        JobPhase.CANCELLED,
    }
    team_filters: list[str | list[str] | None] = [None, "llm", ["vision", "audio"], []]
    phase_filters: list[JobPhase | list[JobPhase] | None] = [
        None,
        JobPhase.PENDING,
        [JobPhase.ADMITTED, JobPhase.RUNNING],
        [JobPhase.CANCELLED, JobPhase.PENDING],
    ]
    for team_filter in team_filters:
        for phase_filter in phase_filters:
            for user in (None, "ann", "nobody"):
                in_teams = [team_filter] if isinstance(team_filter, str) else team_filter
                in_phases = [phase_filter] if isinstance(phase_filter, JobPhase) else phase_filter
                expected = [
                    view.id
                    for view in stored
                    if (in_teams is None or view.team in in_teams)
                    and (in_phases is None or view.phase in in_phases)
                    and (user is None or view.spec.user == user)
                ]
                what = (team_filter, phase_filter, user)
                count = store.count_jobs(team=team_filter, phase=phase_filter, user=user)
                assert count == len(expected), what
                listed = store.list_jobs(team=team_filter, phase=phase_filter, user=user)
                assert sorted(v.id for v in listed) == sorted(expected), what


def test_job_events_between_gives_a_time_window_in_order(store: SqlStore) -> None:
    for i in range(4):
        submit(store, f"j{i}", "llm" if i < 2 else "vision", at=float(i))
    window = store.job_events_between(1.0, 3.0)
    assert [(e.job, e.at_s) for e in window] == [("j1", 1.0), ("j2", 2.0)]
    assert [e.job for e in store.job_events_between(0.0, 9.0, team="vision")] == ["j2", "j3"]


def test_jobs_submitted_between_gives_the_windows_jobs_finished_or_not_with_history(
    store: SqlStore,
) -> None:
    for i in range(4):
        submit(store, f"j{i}", at=float(i))
    done = advance(store.job(JobId("j2")), JobPhase.CANCELLED, now=5.0, cause="cancelled by x")
    store.save_jobs([done], now=5.0)
    window = store.jobs_submitted_between(1.0, 3.0)
    assert list(window) == ["j1", "j2"]  # from the start, up to the end (not included)
    assert window[JobId("j2")].phase is JobPhase.CANCELLED
    assert [c.phase for c in window[JobId("j2")].history] == [JobPhase.PENDING, JobPhase.CANCELLED]
    assert store.jobs_submitted_between(9.0, 10.0) == {}


def test_every_policy_version_is_kept_with_its_author(store: SqlStore) -> None:
    assert store.policy() is None
    first, second = policy(team("llm", 8)), policy(team("llm", 16), team("vision", 8))
    assert store.save_policy(first, actor="alice", now=1.0) == 1
    assert store.save_policy(second, actor="bob", now=2.0) == 2
    assert store.policy() == second
    assert store.policy_at(1) == first
    assert store.policy_at(3) is None
    assert [(v.version, v.actor, v.at_s) for v in store.policy_versions()] == [
        (1, "alice", 1.0),
        (2, "bob", 2.0),
    ]


def test_saving_nodes_replaces_the_inventory_in_order(store: SqlStore) -> None:
    nodes, _ = gpu_cluster([1, 1, 4])
    store.save_nodes(nodes, actor="topoq", now=1.0)
    assert store.nodes() == nodes
    cordoned = replace(nodes[2], unschedulable=True, ready=False)
    smaller = [nodes[3], cordoned, nodes[0]]
    store.save_nodes(smaller, actor="admin", now=2.0)
    assert store.nodes() == smaller
    store.save_nodes([], actor="admin", now=3.0)
    assert store.nodes() == []


def test_the_audit_log_is_newest_first_and_keeps_everything(store: SqlStore) -> None:
    entries = [AuditEntry(float(i), "alice", "submit", f"j{i}", {"team": "llm"}) for i in range(5)]
    for entry in entries:
        store.audit(entry)
    store.audit(AuditEntry(2.0, "bob", "cancel", "j0"))  # same time: insertion order still wins
    log = store.audit_log()
    assert log[0] == AuditEntry(2.0, "bob", "cancel", "j0")
    assert log[1:] == list(reversed(entries))
    assert store.audit_log(limit=2) == log[:2]


def test_the_sql_store_offers_every_method_of_the_engine_port(store: SqlStore) -> None:
    as_port: Store = store  # mypy checks the protocol; this checks the parameters at run time
    for name, wanted in vars(Store).items():
        if name.startswith("_") or not callable(wanted):
            continue
        offered = inspect.signature(getattr(as_port, name)).parameters
        for parameter in list(inspect.signature(wanted).parameters.values())[1:]:
            assert parameter.name in offered, f"{name} lacks {parameter.name}"
            assert offered[parameter.name].kind == parameter.kind, f"{name}.{parameter.name}"


def test_holding_jobs_and_counts_by_team_and_phase_read_what_they_say(store: SqlStore) -> None:
    store.save_policy(policy(team("llm", 16), team("cv", 16)), actor="admin", now=0.5)
    for number in range(6):  # 4 nodes of 8 GPUs, one whole node each: 4 run, 2 wait
        submit(store, f"llm-{number}", "llm", at=1.0 + number)
    submit(store, "cv-0", "cv", at=9.0)
    _, after = run_cycle(store, now=10.0)
    holding = {job_id for job_id, view in after.items() if view.phase.holds_capacity}
    assert set(store.holding_jobs()) == holding and len(holding) == 4
    assert all(view.allocation is not None for view in store.holding_jobs().values())
    store.save_jobs(
        [advance(store.job(JobId("llm-5")), JobPhase.CANCELLED, now=11.0, cause="user")], now=11.0
    )
    expected: dict[tuple[str, JobPhase], int] = {}
    for view in store.jobs().values():
        expected[(view.team, view.phase)] = expected.get((view.team, view.phase), 0) + 1
    assert store.count_jobs_by_team_and_phase(["llm", "cv", "none"]) == expected
    assert store.count_jobs_by_team_and_phase(["cv"]) == {("cv", JobPhase.RUNNING): 1}
    assert sum(expected.values()) == 6  # the cancelled job is not counted


def test_team_counts_see_this_stores_writes_at_once_and_others_within_the_memory(
    store_location: StoreLocation,
) -> None:
    api, controller = store_location.open(), store_location.open()  # two processes' stores
    try:
        submit(api, "mine", "llm")
        assert api.count_jobs_by_team_and_phase(["llm"]) == {("llm", JobPhase.PENDING): 1}
        submit(controller, "theirs", "llm")
        time.sleep(TEAM_COUNTS_S)
        assert api.count_jobs_by_team_and_phase(["llm"]) == {("llm", JobPhase.PENDING): 2}
        view = api.job(JobId("mine"))
        api.save_jobs([advance(view, JobPhase.CANCELLED, now=2.0, cause="user")], now=2.0)
        assert api.count_jobs_by_team_and_phase(["llm"]) == {("llm", JobPhase.PENDING): 1}
    finally:
        api.close()
        controller.close()
