"""``topoq simulate --trace --queue-order submission --queue-order shortest-first`` as a user
runs it: the same arrivals under the policy's order of jobs of one priority replaced by each,
in one table. On ITP's sample squeezed onto half its cluster, shortest-first (by time limits
of each job's duration × 1.5) cuts the mean wait, and a long job waits longer than it did."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from tests.cli.test_cli import topoq
from tests.sim.conftest import SCENARIOS
from tests.sim.test_compare import POLICY
from tests.sim.test_traces import ITP
from topoq.cli.app import QueueOrderOption
from topoq.discovery.policy import load_policy
from topoq.domain.governance import QueueOrder
from topoq.sim.engine import Simulation
from topoq.sim.log import Decision
from topoq.sim.traces import read_trace, trace_scenario


def test_topoq_simulate_compares_queue_orders_on_the_same_arrivals(tmp_path: Path) -> None:
    half = tmp_path / "half.yaml"
    half.write_text(POLICY.format(name="half", nodes=8))
    args = ("simulate", "--trace", ITP, "--policy", half, "--time-limit-factor", "1.5")
    orders = ("--queue-order", "submission", "--queue-order", "shortest-first")
    ran = topoq(*args, *orders, "-o", "json")
    assert ran.returncode == 0, ran.stderr
    submission, shortest = json.loads(ran.stdout)
    assert (submission["policy"], shortest["policy"]) == ("submission", "shortest-first")
    assert submission["completed"] == shortest["completed"] == 40
    assert shortest["wait"]["mean"] < submission["wait"]["mean"]
    assert shortest["wait"]["p99"] >= submission["wait"]["p99"]  # the longest jobs pay for it

    scenario = trace_scenario(read_trace(ITP), policy=load_policy(half), time_limit_factor=1.5)
    by_order = {
        order: Simulation(replace(scenario, policy=replace(scenario.policy, queue_order=order)))
        .run()
        .log
        for order in QueueOrder
    }
    assert by_order[QueueOrder.SUBMISSION] != by_order[QueueOrder.SHORTEST_FIRST]
    starts = [e.job for e in by_order[QueueOrder.SHORTEST_FIRST] if e.decision is Decision.START]
    assert len(starts) == 40


def test_a_queue_order_without_a_trace_is_refused() -> None:
    refused = topoq("simulate", SCENARIOS / "reclaim.yaml", "--queue-order", "shortest-first")
    assert refused.returncode == 2 and "--trace" in refused.stderr
    assert "Traceback" not in refused.stderr
    bad = topoq("simulate", "--trace", ITP, "--queue-order", "sjf")
    assert bad.returncode == 2 and "shortest-first" in bad.stderr


def test_the_queue_order_option_offers_every_queue_order() -> None:
    assert [option.value for option in QueueOrderOption] == [order.value for order in QueueOrder]


def test_shortest_first_on_a_trace_without_time_limits_is_refused(tmp_path: Path) -> None:
    """The traces record no time limits: shortest-first would order as submission does and
    the comparison would show two identical runs."""
    orders = ("--queue-order", "submission", "--queue-order", "shortest-first")
    refused = topoq("simulate", "--trace", ITP, *orders)
    assert refused.returncode == 2 and "--time-limit-factor" in refused.stderr
    assert "Traceback" not in refused.stderr
    classes = tmp_path / "classes.yaml"
    classes.write_text(
        POLICY.format(name="classes", nodes=8).replace(
            "scheduling: {idleResourceSharing: false}",
            "scheduling:\n  idleResourceSharing: false\n"
            "  priorityClasses: [{name: normal, weight: 1, timeLimit: 1d}]\n"
            "  defaultPriorityClass: normal",
        )
    )
    allowed = topoq("simulate", "--trace", ITP, "--policy", classes, *orders, "-o", "json")
    assert allowed.returncode == 0, allowed.stderr  # the classes' limits order them
