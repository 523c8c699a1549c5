"""Job phases: the transition table, advance(), and the generated state-machine document."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoq.core.lifecycle import IllegalTransition, advance
from topoq.domain.job import (
    PHASE_MOVES,
    TRANSITIONS,
    JobId,
    JobPhase,
    PhaseMove,
    render_state_machine,
)
from topoq.testing.governance import job

ROOT = Path(__file__).resolve().parents[2]


def test_state_machine_document_is_generated_from_the_table() -> None:
    assert (ROOT / "docs" / "state-machines.md").read_text() == render_state_machine()


def test_finished_phases_have_no_way_out() -> None:
    for phase in JobPhase:
        assert (not TRANSITIONS[phase]) == phase.finished


@pytest.mark.parametrize("move", PHASE_MOVES, ids=lambda m: f"{m.source}->{m.target}")
def test_every_listed_move_is_allowed_and_recorded(move: PhaseMove) -> None:
    view = job("j", "a")
    path = {
        JobPhase.PENDING: [],
        JobPhase.ADMITTED: [JobPhase.ADMITTED],
        JobPhase.RUNNING: [JobPhase.ADMITTED, JobPhase.RUNNING],
        JobPhase.PREEMPTING: [JobPhase.ADMITTED, JobPhase.RUNNING, JobPhase.PREEMPTING],
    }[move.source]
    for step, phase in enumerate(path):
        view = advance(view, phase, now=step, cause="setup")
    moved = advance(view, move.target, now=99, cause="because")
    assert moved.phase is move.target
    assert moved.history[-1].cause == "because" and moved.history[-1].at_s == 99


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ([], JobPhase.RUNNING),
        ([], JobPhase.SUCCEEDED),
        ([JobPhase.ADMITTED, JobPhase.RUNNING, JobPhase.SUCCEEDED], JobPhase.RUNNING),
        ([JobPhase.CANCELLED], JobPhase.PENDING),
        ([JobPhase.ADMITTED, JobPhase.PREEMPTING], JobPhase.RUNNING),
        ([JobPhase.ADMITTED, JobPhase.RUNNING, JobPhase.PREEMPTING], JobPhase.SUCCEEDED),
    ],
)
def test_illegal_moves_are_rejected_with_the_job_and_phases(
    path: list[JobPhase], illegal: JobPhase
) -> None:
    view = job("j7", "a")
    for phase in path:
        view = advance(view, phase, now=0, cause="setup")
    with pytest.raises(IllegalTransition, match=f"job j7: cannot go from .* to {illegal.value}"):
        advance(view, illegal, now=1, cause="oops")


def test_a_victim_keeps_its_allocation_while_stopping_and_releases_it_once_requeued() -> None:
    view = advance(job("j", "a"), JobPhase.ADMITTED, now=0, cause="ok")
    view = advance(view, JobPhase.RUNNING, now=1, cause="started")
    allocation = view.allocation
    view = advance(view, JobPhase.PREEMPTING, now=2, cause="reclaim", preempted_for=JobId("p"))
    assert view.preemptions == 1 and view.allocation is allocation and view.started_at == 1
    assert view.phase.holds_capacity and not view.phase.finished
    assert view.preempted_for == "p" and view.preempting_since == 2
    view = advance(view, JobPhase.PENDING, now=5, cause="stopped")
    assert view.allocation is None and view.preempted_for is None
    assert view.preemptions == 1 and view.preempting_since is None
