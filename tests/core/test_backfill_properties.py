"""A held gang is never delayed by a backfilled job (hypothesis): whatever runs, whatever
arrives after the gang starved, once every job that promised by its time limit to end by the
gang's ETA has ended, the gang is admitted at its ETA. (The gang is the one starving job, so
its ETA is its hold's expected start, not a team head's lower bound.)"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from topoq.core.time_limits import end_by_limit
from topoq.domain.job import JobId, JobPhase
from topoq.testing.builders import BLOCK
from topoq.testing.governance import Cluster, job, policy, team

SHAPE = [2, 2, 4]  # 16 nodes of 8 GPUs
GUARD_S = 100
NOW = 1000.0
limits = st.sampled_from([None, 100.0, 300.0, 600.0, 900.0, 1500.0, 3000.0])
small_jobs = st.tuples(st.integers(1, 2), st.sampled_from([2, 4, 8]), limits)
whole_node_jobs = st.tuples(
    st.integers(1, 3), st.just(8), st.sampled_from([None, 300.0, 600.0, 900.0, 1500.0, 3000.0])
)
modes: list[dict[str, Any]] = [{}, {"preferred": BLOCK}, {"required": BLOCK}]


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
@given(
    fillers=st.lists(whole_node_jobs, min_size=6, max_size=12),
    gang_pods=st.integers(4, 16),
    mode=st.sampled_from(modes),
    later=st.lists(small_jobs, max_size=10),
)
def test_a_held_gang_starts_at_its_eta_whatever_backfilled(
    fillers: list[tuple[int, int, float | None]],
    gang_pods: int,
    mode: dict[str, Any],
    later: list[tuple[int, int, float | None]],
) -> None:
    guarded = replace(policy(team("a", 1024)), starvation_guard_s=GUARD_S)
    c = Cluster.of(SHAPE, guarded)
    c.submit(*(job(f"f{i}", "a", p, g, time_limit=t) for i, (p, g, t) in enumerate(fillers)))
    c.cycle()
    for view in list(c.jobs.values()):  # only the gang starves; limits are enforced
        end = end_by_limit(c.policy, view, NOW)
        if view.phase is JobPhase.PENDING:
            del c.jobs[view.id]
        elif end is not None and end <= NOW:
            c.finish(view.id, JobPhase.FAILED)
    c.submit(job("gang", "a", gang_pods, **mode))
    c.now = NOW
    c.submit(*(job(f"l{i}", "a", p, g, time_limit=t) for i, (p, g, t) in enumerate(later)))
    c.cycle()
    assume(c.phase("gang") is JobPhase.PENDING)
    diagnostic = next(d for d in c.last.diagnostics if d.job == "gang")
    eta = diagnostic.numbers.get("eta_at")
    assume(isinstance(eta, int))
    assert isinstance(eta, int)
    backfilled = [j for j in c.running() if j.startswith("l")]
    event(f"later jobs started beside the held gang: {bool(backfilled)}")
    for view in list(c.jobs.values()):
        end = end_by_limit(c.policy, view, c.now)
        if view.phase is JobPhase.RUNNING and end is not None and end <= eta:
            c.finish(view.id)
    for view in list(c.jobs.values()):  # the rest of the queue must not matter at the ETA
        if view.phase is JobPhase.PENDING and view.id != JobId("gang"):
            c.jobs[view.id] = replace(view, held=True)
    c.now = float(eta)
    c.cycle()
    assert c.phase("gang") is JobPhase.RUNNING, (diagnostic, c.last.diagnostics)
