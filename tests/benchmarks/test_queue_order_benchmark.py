"""``benchmarks.queue_order`` on the Philly sample, so that the runner cannot rot: both orders
replay every job under both policies; the partitioned policy leaves out exactly the jobs no
virtual cluster of theirs can run, and its jobs wait where the shared policy's do not."""

from __future__ import annotations

import math

from benchmarks.queue_order import replay, runs_table, table
from tests.sim.test_traces import PHILLY
from topoq.domain.governance import QueueOrder
from topoq.sim.traces import GPUS_PER_NODE, read_trace


def test_the_runner_compares_both_orders_under_both_policies() -> None:
    trace = read_trace(PHILLY)
    scale = 0.05
    rows = [
        replay(trace, policy, order, 1.5, scale)
        for policy in ("shared", "partitioned")
        for order in QueueOrder
    ]
    assert all(row.figures.completed == row.figures.jobs for row in rows)
    sizes = {team: max(1, round(nodes * scale)) for team, nodes in trace.guarantees.items()}
    unrunnable = sum(
        1
        for job in trace.jobs
        if not sizes.get(job.team) or math.ceil(job.gpus / GPUS_PER_NODE) > sizes[job.team]
    )
    by_policy = {(row.policy, row.order): row for row in rows}
    shared = by_policy["shared", QueueOrder.SUBMISSION]
    partitioned = by_policy["partitioned", QueueOrder.SUBMISSION]
    assert shared.left_out == 0 and shared.figures.jobs == len(trace.jobs)
    assert partitioned.left_out == unrunnable > 0
    assert partitioned.figures.jobs == len(trace.jobs) - unrunnable
    assert (shared.figures.wait.mean or 0) < (partitioned.figures.wait.mean or 0)
    shown = table(rows, markdown=True).splitlines()
    assert sum(1 for line in shown if "| all |" in line) == 2
    assert len(runs_table(rows).splitlines()) == 1 + len(rows)
