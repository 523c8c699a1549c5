"""Fair share with usage history through the controller: usage accrues while teams borrow,
is kept in the store and goes on from there after a restart, orders admissions, chooses
fair-share victims, and wakes a settled queue when time alone may change a decision."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from topoq.core.fair_share import TeamUsage
from topoq.domain.governance import ClusterPolicy, IdleAllocation, TeamName
from topoq.domain.job import JobId, JobPhase
from topoq.domain.topology import TopologySpec
from topoq.engine.controller import USAGE_SAVE_INTERVAL_S, Controller
from topoq.engine.ports import Store
from topoq.store import open_store
from topoq.testing.fakes import MemoryStore, ScriptedExecutor
from topoq.testing.governance import gpu_cluster, job, policy, team

A, B = TeamName("a"), TeamName("b")
HALF_LIFE_S = 3600.0


class Clock:
    """Time stands still until a test moves it."""

    def __init__(self, now: float = 0.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def fair(half_life_s: float = HALF_LIFE_S) -> ClusterPolicy:
    """Teams a and b, no guarantee, each may borrow all 8 nodes (64 GPUs); no starvation
    guard, so that time enters the cycle only through usage history."""
    teams = (team("a", 0, borrow_gpus=64), team("b", 0, borrow_gpus=64))
    rules = policy(*teams, fair_share=True, fifo=True)
    return replace(rules, fair_share_usage_half_life_s=half_life_s, starvation_guard_s=0)


def controller(
    store: Store, clock: Clock, rules: ClusterPolicy | None = None
) -> tuple[Controller, TopologySpec]:
    nodes, spec = gpu_cluster([1, 2, 4])
    if not store.nodes():
        store.save_nodes(nodes, actor="test", now=0)
    if rules is not None:
        store.save_policy(rules, actor="test", now=0)
    return Controller(store, ScriptedExecutor(), spec, clock=clock), spec


def submit(c: Controller, job_id: str, team_name: str, pods: int = 1) -> None:
    c.intake.submit(job(job_id, team_name, pods, at=c.clock()).spec, actor="alice")


def test_usage_accrues_while_a_team_borrows_and_is_saved_once_a_minute() -> None:
    clock, store = Clock(), MemoryStore()
    c, _ = controller(store, clock, fair())
    submit(c, "a1", "a", pods=2)  # 2 of 8 nodes: a borrows a quarter of the cluster
    c.step()
    assert store.fair_share_usage() == {A: TeamUsage(0.0, 0.0)}  # it holds from this step
    clock.now = HALF_LIFE_S
    c.step()
    usage = store.fair_share_usage()
    assert usage[A].share == pytest.approx(0.125)  # half of the way to 0.25 in one half-life
    assert usage[A].as_of_s == HALF_LIFE_S
    clock.now += USAGE_SAVE_INTERVAL_S / 2
    assert c.step().settled
    assert store.fair_share_usage() == usage  # not yet a minute since the last save
    clock.now += USAGE_SAVE_INTERVAL_S
    c.step()
    assert store.fair_share_usage()[A].share > usage[A].share


def test_after_a_restart_usage_goes_on_from_the_store_decayed_over_the_gap() -> None:
    clock, store = Clock(), MemoryStore()
    store.save_fair_share_usage({A: TeamUsage(0.8, 0.0)})
    c, _ = controller(store, clock, fair())
    clock.now = 2 * HALF_LIFE_S
    submit(c, "b1", "b")
    c.step()
    assert store.fair_share_usage()[A].share == pytest.approx(0.2)
    assert store.fair_share_usage()[B] == TeamUsage(0.0, 2 * HALF_LIFE_S)  # holds from now


@pytest.mark.parametrize(("half_life_s", "first"), [(HALF_LIFE_S, ["b1", "b2"]), (0, ["a1"])])
def test_the_team_with_less_usage_is_admitted_first(
    tmp_path: Path, half_life_s: float, first: list[str]
) -> None:
    """a used 90 % of the cluster recently; it submits first, b just after. With history b's
    jobs start first; without, the teams stand equal and a's earlier submission goes first."""
    clock = Clock(10.0)
    with open_store(None, tmp_path) as store:
        store.save_fair_share_usage({A: TeamUsage(0.9, 10.0)})
        c, _ = controller(store, clock, fair(half_life_s))
        for index in range(1, 9):
            submit(c, f"a{index}", "a")  # enough for the whole cluster
        clock.now = 11.0
        submit(c, "b1", "b")
        submit(c, "b2", "b")
        report = c.step()
    assert report.started[: len(first)] == first
    assert len(report.started) == 8


def holdings(store: Store, clock: Clock, rules: ClusterPolicy) -> tuple[Controller, list[str]]:
    """a runs 5 of the 8 nodes, b 3 and b used the cluster recently (0.3); then b submits one
    more. The preemptions of the step that considers it."""
    store.save_fair_share_usage({B: TeamUsage(0.3, 0.0)})
    c, _ = controller(store, clock, rules)
    for index in range(1, 6):
        submit(c, f"a{index}", "a")
    for index in range(1, 4):
        submit(c, f"b{index}", "b")
    assert len(c.step().started) == 8
    clock.now = 1.0
    submit(c, "b4", "b")
    report = c.step()
    assert not report.settled
    return c, [p.victim for p in report.result.preemptions]


def test_usage_holds_back_a_fair_share_preemption_until_time_evens_it_out() -> None:
    clock, store = Clock(), MemoryStore()
    c, victims = holdings(store, clock, fair())
    assert victims == []  # 4/8 + 0.3 for b against a's 4/8 once a gives one up
    clock.now = 2.0
    assert c.step().settled  # a thousandth of the half-life (3.6 s) has not passed
    # two half-lives on, a's usage (it held 5/8) is above b's: b4 may take a's work
    clock.now = 2 * HALF_LIFE_S
    report = c.step()
    assert not report.settled
    [preempt] = report.result.preemptions
    assert preempt.for_job == "b4" and preempt.victim.startswith("a")
    assert preempt.cause.value == "PREEMPTED_FOR_FAIR_SHARE"
    assert store.job(JobId("b4")).phase is JobPhase.PENDING  # waiting for its victim


def test_without_history_the_instantaneous_share_preempts_at_once() -> None:
    clock, store = Clock(), MemoryStore()
    _, victims = holdings(store, clock, fair(half_life_s=0))
    assert len(victims) == 1 and victims[0].startswith("a")  # 4/8 each afterwards


def test_without_history_a_settled_queue_stays_settled_however_long_it_waits() -> None:
    clock, store = Clock(), MemoryStore()
    c, _ = controller(store, clock, fair(half_life_s=0))
    for index in range(1, 5):
        submit(c, f"a{index}", "a")
        submit(c, f"b{index}", "b")
    c.step()
    submit(c, "b5", "b")  # 5/8 for b against 3/8 for a: never a fair-share victim
    assert c.step().result.preemptions == ()
    clock.now = 2 * HALF_LIFE_S
    report = c.step()
    assert report.settled
    assert store.fair_share_usage() == {}


def test_a_settled_cycle_with_nothing_waiting_is_not_rerun_for_usage() -> None:
    clock, store = Clock(), MemoryStore()
    c, _ = controller(store, clock, fair())
    submit(c, "a1", "a")
    c.step()
    clock.now = 1.0
    assert not c.step().settled  # the first cycle after a change
    clock.now = 2 * HALF_LIFE_S
    assert c.step().settled


def test_first_come_keeps_no_usage_and_switching_to_it_clears_the_history() -> None:
    clock, store = Clock(), MemoryStore()
    store.save_fair_share_usage({A: TeamUsage(0.5, 0.0)})
    c, _ = controller(store, clock, replace(fair(), idle_allocation=IdleAllocation.FIRST_COME))
    submit(c, "a1", "a")
    c.step()
    assert store.fair_share_usage() == {}
