"""The starvation guard in one cycle after another: a gang that has waited longer than the
guard holds what it needs whatever its placement mode, its expected start comes from the
time limits of running jobs, and only jobs that end by then backfill into it."""

from __future__ import annotations

from dataclasses import replace

import pytest

from topoq.core.cycle import Snapshot, schedule
from topoq.domain.decisions import PendingReason
from topoq.domain.governance import ClusterPolicy
from topoq.testing.governance import Cluster, job, policy, team

SHAPE = [1, 2, 4]  # 8 nodes, two blocks of 4
BLOCK = "block"
GUARD_S = 100
MODES = {
    "required": {"required": BLOCK},
    "preferred": {"preferred": BLOCK},
    "unconstrained": {},
}


def guarded(guard_s: float = GUARD_S) -> ClusterPolicy:
    return replace(policy(team("a", 128)), starvation_guard_s=guard_s)  # room, not quota


def stream_against_gang(
    mode: str, guard_s: float, *, limits: bool = True
) -> tuple[Cluster, float | None]:
    """Eight 1-node fillers end one every 100 s from t=200 (each limited to exactly its run
    time when ``limits``); a 4-node gang waits from t=1; from t=150 a 1-node job without a
    time limit arrives every 100 s, just before a filler ends. When the gang starts."""
    fillers = [job(f"x{i}", "a", 1, time_limit=200 + 100 * i if limits else None) for i in range(8)]
    c = Cluster.of(SHAPE, guarded(guard_s), *fillers)
    c.cycle()
    c.now = 1
    c.submit(job("gang", "a", 4, **MODES[mode]))
    c.cycle()
    for i in range(8):
        c.now = 150 + 100 * i
        c.submit(job(f"s{i}", "a", 1))
        c.cycle()
        c.now = 200 + 100 * i
        c.finish(f"x{i}")
        c.cycle()
        if "gang" in c.running():
            return c, c.now
    return c, None


@pytest.mark.parametrize("mode", ["preferred", "unconstrained"])
def test_without_the_guard_small_jobs_take_every_node_that_frees(mode: str) -> None:
    _, started = stream_against_gang(mode, guard_s=0)
    assert started is None


@pytest.mark.parametrize("mode", list(MODES))
@pytest.mark.parametrize("limits", [True, False], ids=["limited", "unlimited"])
def test_a_starving_gang_starts_once_the_capacity_it_holds_is_free(mode: str, limits: bool) -> None:
    c, started = stream_against_gang(mode, GUARD_S, limits=limits)
    assert started == 500, f"x0…x3 (one block) end by t=500: {c.running()}"
    assert not {f"s{i}" for i in range(8)} & c.running(), "no small job took a node it holds"


def test_the_held_gang_has_an_eta_from_the_running_time_limits() -> None:
    fillers = [job(f"x{i}", "a", 1, time_limit=200 + 100 * i) for i in range(8)]
    c = Cluster.of(SHAPE, guarded(), *fillers)
    c.cycle()
    c.now = 1
    c.submit(job("gang", "a", 4))
    c.now = 150
    c.cycle()
    gang = next(d for d in c.last.diagnostics if d.job == "gang")
    assert gang.numbers["eta_at"] == 500


def test_only_a_job_that_ends_before_the_eta_backfills_into_held_capacity() -> None:
    fillers = [job(f"x{i}", "a", 1, time_limit=1000) for i in range(6)]
    c = Cluster.of(SHAPE, guarded(), *fillers)
    c.cycle()
    c.now = 1
    c.submit(job("gang", "a", 8))  # the whole cluster, from t=1000
    c.now = 200
    c.submit(
        job("fits", "a", 1, time_limit=700),  # ends at 900
        job("late", "a", 1, time_limit=900),  # ends at 1100
        job("open", "a", 1),
    )
    c.cycle()
    assert c.running() >= {"fits"}
    assert c.reason("late") == PendingReason.RESERVED_FOR_LARGER_GANG
    assert c.reason("open") == PendingReason.RESERVED_FOR_LARGER_GANG
    remedies = next(d.remedies for d in c.last.diagnostics if d.job == "open")
    assert any("time limit of at most 13m20s" in r for r in remedies), remedies


def test_a_job_that_could_never_run_holds_nothing() -> None:
    c = Cluster.of(SHAPE, guarded(), job("x0", "a", 1, time_limit=1000))
    c.cycle()
    c.now = 1
    c.submit(job("huge", "a", 9))  # more nodes than the cluster has
    c.now = 500
    c.submit(job("small", "a", 1))
    c.cycle()
    assert "small" in c.running()


def test_the_guard_decides_the_same_on_the_same_snapshot() -> None:
    fillers = [job(f"x{i}", "a", 1, time_limit=200 + 100 * i) for i in range(8)]
    c = Cluster.of(SHAPE, guarded(), *fillers)
    c.cycle()
    c.submit(job("gang", "a", 4), job("s", "a", 1, time_limit=50))
    snapshot = Snapshot(400.0, c.tree, tuple(c.jobs.values()), c.policy)
    assert schedule(snapshot) == schedule(snapshot)


def test_of_two_starving_gangs_the_one_fair_share_serves_first_is_held_for() -> None:
    """Team a holds the whole cluster on borrowed capacity; a's gang waits from t=1, b's from
    t=2, both past the guard when nodes free one at a time. The guard holds for the starving
    job the cycle would consider first — b's, whose team borrows nothing — not for the older
    one, so the guard never turns fair share around. (a's weight of 100 keeps its position
    low enough that b's gang evicts nothing: only the guard decides who gets the nodes.)"""
    teams = (team("a", 0, borrow_gpus=64, weight=100), team("b", 0, borrow_gpus=64))
    rules = replace(policy(*teams, fair_share=True), starvation_guard_s=GUARD_S)
    fillers = [job(f"x{i}", "a", 1) for i in range(8)]
    c = Cluster.of(SHAPE, rules, *fillers)
    c.cycle()
    c.now = 1
    c.submit(job("a-gang", "a", 4))
    c.now = 2
    c.submit(job("b-gang", "b", 4))
    c.cycle()
    for i in range(4):
        c.now = 200 + 100 * i
        c.finish(f"x{i}")
        c.cycle()
    assert "b-gang" in c.running() and "a-gang" not in c.running()
    held = [d for d in c.last.diagnostics if d.numbers.get("held_for")]
    assert all(d.numbers["held_for"] == "b-gang" for d in held)


def test_a_starving_job_admitted_in_its_turn_releases_its_holds() -> None:
    """Team a may borrow two nodes; its two 1-node jobs starve while b fills the cluster. When
    two nodes free, the first holds its quota, is admitted — and its hold goes with it, so the
    second (which fits beside it) is admitted too rather than kept out by a hold for a job that
    no longer waits."""
    teams = (team("a", 0, borrow_gpus=16), team("b", 64))
    rules = replace(policy(*teams), starvation_guard_s=GUARD_S)
    fillers = [job(f"x{i}", "b", 1) for i in range(8)]
    c = Cluster.of(SHAPE, rules, *fillers)
    c.cycle()
    c.now = 1
    c.submit(job("a1", "a", 1), job("a2", "a", 1))
    c.cycle()
    c.now = 200
    for name in ("x0", "x1"):
        c.finish(name)
    c.cycle()
    assert {"a1", "a2"} <= c.running()
