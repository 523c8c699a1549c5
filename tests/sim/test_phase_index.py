"""The controller the simulator runs hands each cycle its unfinished jobs sorted out by phase
(``PhaseIndex``, ``Snapshot.by_phase``) instead of the cycle sorting out every job: on every
shipped example scenario (holds, dependencies, preemptions with stop delays, failed nodes,
retries), each cycle's index holds the very jobs of its snapshot, sorted out as a pass over
them would."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.sim.conftest import SCENARIOS
from topoq.core.cycle import Parking, Snapshot, schedule
from topoq.core.cycle.by_phase import READY_CHANGES_KEPT, JobsByPhase, PhaseIndex
from topoq.core.tree import build_tree
from topoq.domain.decisions import CycleResult
from topoq.domain.job import Dependency, DependencyKind, JobId, JobPhase, JobView
from topoq.engine import controller as controller_module
from topoq.sim.controlled import ReplayStore
from topoq.sim.engine import Simulation
from topoq.sim.scenario import load_scenario
from topoq.testing.governance import job

EXAMPLES = sorted(
    path.name
    for path in SCENARIOS.glob("*.yaml")
    if path.name not in ("cluster.yaml", "policy.yaml")
)


def _ids(jobs: Iterable[object]) -> set[int]:
    return set(map(id, jobs))


def _alike(given: JobsByPhase, passed: JobsByPhase) -> bool:
    """The very same jobs in each part, in whatever order."""
    return (
        list(given.holding) == [view.id for view in given.holding.values()]
        and _ids(given.holding.values()) == _ids(passed.holding.values())
        and _ids(given.ready) == _ids(passed.ready)
        and _ids(given.held) == _ids(passed.held)
        and _ids(given.dependents) == _ids(passed.dependents)
        and _ids(given.preempting) == _ids(passed.preempting)
    )


@pytest.mark.parametrize("name", EXAMPLES)
def test_every_cycle_is_handed_its_snapshots_jobs_sorted_out(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    scenario = load_scenario(SCENARIOS / name)
    if scenario.until_s is None or scenario.until_s > 2000:  # the long one: its first part
        events = tuple(event for event in scenario.events if event.at_s <= 2000)
        scenario = replace(scenario, events=events, until_s=2000.0)
    schedule = controller_module.schedule_with_parking
    checked = []

    def checking(snapshot: Snapshot, parking: Parking | None = None) -> tuple[CycleResult, Parking]:
        assert snapshot.by_phase is not None
        assert _alike(snapshot.by_phase, JobsByPhase(snapshot.jobs)), snapshot.now
        checked.append(snapshot.now)
        return schedule(snapshot, parking)

    monkeypatch.setattr(controller_module, "schedule_with_parking", checking)
    Simulation(scenario).run()
    assert checked


def test_an_index_follows_each_job_as_it_is_stored_and_forgets_finished_ones() -> None:
    index = PhaseIndex()
    waiting = job("a", "team", 1)
    held = replace(job("b", "team", 1), held=True)
    index.store(waiting)
    index.store(held)
    assert index.sorted_out().ready == (waiting,) and index.sorted_out().held == (held,)
    running = replace(waiting, phase=JobPhase.RUNNING)
    index.store(running)
    sorted_out = index.sorted_out()
    assert sorted_out.ready == () and sorted_out.holding == {"a": running}
    stopping = replace(running, phase=JobPhase.PREEMPTING)
    index.store(stopping)
    assert index.sorted_out().preempting == (stopping,)
    index.store(replace(stopping, phase=JobPhase.SUCCEEDED))
    index.forget(held.id)
    emptied = index.sorted_out()
    assert not (emptied.holding or emptied.ready or emptied.held or emptied.preempting)


def test_a_cycle_leaves_the_jobs_it_is_handed_as_they_were() -> None:
    """The sorted-out jobs belong to the snapshot: a cycle that admits works on its own
    copy, so the same snapshot decides the same again."""
    scenario = load_scenario(SCENARIOS / "reclaim.yaml")
    index = PhaseIndex()
    submitted = [event.action.spec for event in scenario.events if hasattr(event.action, "spec")]
    views = [job(spec.id, spec.team, 1) for spec in submitted[:3]]
    for view in views:
        index.store(view)
    tree = build_tree(scenario.nodes, scenario.topology)
    snapshot = Snapshot(0.0, tree, tuple(views), scenario.policy, by_phase=index.sorted_out())
    first = schedule(snapshot)
    assert first.admissions
    assert snapshot.by_phase is not None and not snapshot.by_phase.holding
    assert schedule(snapshot) == first


_PHASES = (JobPhase.PENDING, JobPhase.ADMITTED, JobPhase.RUNNING, JobPhase.PREEMPTING)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(
            st.tuples(st.integers(0, 11), st.sampled_from(_PHASES), st.booleans(), st.booleans()),
            max_size=8,
        ),
        min_size=1,
        max_size=12,
    ),
    st.lists(st.integers(0, 11), max_size=12),
)
def test_an_index_synced_with_each_read_sorts_out_what_a_pass_over_the_read_would(
    reads: list[list[tuple[int, JobPhase, bool, bool]]], dropped: list[int]
) -> None:
    """The controller's step: each read of the store's unfinished jobs (some views new, some
    the very ones read before, some jobs gone) is sorted out by the index brought up to date
    by identity (``PhaseIndex.synced``) as a pass over the read sorts it out."""
    index = PhaseIndex()
    jobs: dict[JobId, JobView] = {}
    on_up = (Dependency(DependencyKind.AFTER_OK, JobId("up")),)
    for step, changes in enumerate(reads):
        for number, phase, held, depends in changes:
            view = job(f"j{number}", "team", 1, depends=on_up if depends else ())
            jobs[view.id] = replace(view, phase=phase, held=held and phase is JobPhase.PENDING)
        if step < len(dropped):
            jobs.pop(JobId(f"j{dropped[step]}"), None)  # finished: no longer read
        read = dict(jobs)
        assert _alike(index.synced(read), JobsByPhase(read.values()))


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.integers(0, 9), st.sampled_from(_PHASES), st.booleans()), max_size=6),
        min_size=1,
        max_size=40,
    )
)
def test_an_index_tells_what_came_and_went_among_the_ready_since_each_earlier_read(
    steps: list[list[tuple[int, JobPhase, bool]]],
) -> None:
    """Each read's ready jobs say how they came about (``ReadyChanges``): from any earlier
    read still kept, the views that came (in the order of the ready jobs now) and the views
    that went are those a comparison of the two reads finds; from a read no longer kept, or
    another index's, nothing is told."""
    index, other = PhaseIndex(), PhaseIndex()
    reads: list[JobsByPhase] = []
    for changes in steps:
        for number, phase, gone in changes:
            if gone:
                index.forget(JobId(f"j{number}"))
            else:
                index.store(replace(job(f"j{number}", "team", 1), phase=phase))
        reads.append(index.sorted_out())
    now = reads[-1]
    changes_now = now.ready_changes
    assert changes_now is not None and now.ready == reads[-1].ready
    for read in reads:
        assert read.ready_changes is not None
        told = changes_now.since(read.ready_changes.made_from)
        generations_back = changes_now.generation - read.ready_changes.generation
        if generations_back > READY_CHANGES_KEPT:
            assert told is None
            continue
        assert told is not None
        came, went = told
        before = _ids(read.ready)
        assert [id(view) for view in came] == [id(v) for v in now.ready if id(v) not in before]
        assert _ids(went) == before - _ids(now.ready)
        if generations_back == 0:
            assert read.ready is now.ready  # nothing changed: the very same ready jobs
    assert changes_now.since(other.sorted_out().ready_changes.made_from) is None  # type: ignore[union-attr]
    assert changes_now.since(None) is None


_WRITTEN_PHASES = (*_PHASES, JobPhase.SUCCEEDED)


@settings(max_examples=80, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.lists(
                st.tuples(st.integers(0, 11), st.sampled_from(_WRITTEN_PHASES), st.booleans()),
                max_size=6,
            ),
            st.sampled_from(("synced", "plain", "skipped")),
        ),
        min_size=1,
        max_size=25,
    )
)
def test_an_index_synced_with_reads_that_tell_their_changes_sorts_out_each_read(
    steps: list[tuple[list[tuple[int, JobPhase, bool]], str]],
) -> None:
    """The simulator's store tells each read of its unfinished jobs which were written since
    its read before (``TellingRead``); an index that synced that read takes those only. A read
    the index did not sync (another reader's), or one handed as a plain dict, makes the next
    one compared in full. Every synced read is sorted out as a pass over it would be, and the
    ready jobs' changes agree with the reads'."""
    store, index = ReplayStore(), PhaseIndex()
    made: list[JobsByPhase] = []
    for writes, how in steps:
        for number, phase, held in writes:
            job_id = JobId(f"j{number}")
            if job_id in store.finished:
                continue  # a finished job is never written again
            if job_id not in store.unfinished:
                store.add_job(job(job_id, "team", 1).spec, actor="t", now=0.0)
            view = replace(store.job(job_id), phase=phase, held=held)
            store.save_jobs([view], now=0.0)
        read = store.jobs()
        if how == "skipped":
            continue
        sorted_out = index.synced(read if how == "synced" else dict(read))
        assert _alike(sorted_out, JobsByPhase(read.values()))
        made.append(sorted_out)
    for earlier in made:
        assert made[-1].ready_changes is not None and earlier.ready_changes is not None
        told = made[-1].ready_changes.since(earlier.ready_changes.made_from)
        if told is not None:
            came, went = told
            before = _ids(earlier.ready)
            assert _ids(came) == _ids(made[-1].ready) - before
            assert _ids(went) == before - _ids(made[-1].ready)
