"""Policies side by side: the figures of a replay (``topoq.sim.compare``) against the decision
log they come from, Jain's fairness index, and ``topoq simulate --trace --policy A --policy B``
as a user runs it — one policy that leaves the team half the cluster waits longer on the same
arrivals, and running the replays at once changes no figure."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from tests.cli.test_cli import topoq
from tests.sim.conftest import SCENARIOS
from tests.sim.test_traces import ITP
from topoq.cli.app import PlacementOption
from topoq.cli.simulate_command import print_comparison
from topoq.core.cycle import PlacementMode
from topoq.discovery.policy import load_policy
from topoq.sim.compare import Spread, jain, policy_figures
from topoq.sim.engine import Simulation
from topoq.sim.log import Decision
from topoq.sim.traces import read_trace, trace_scenario

POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {{name: {name}}}
scheduling: {{idleResourceSharing: false}}
teams:
- name: itp
  borrowLimitPercent: 0
  quotas: [{{flavor: p5.48xlarge, instances: {nodes}}}]
"""


def test_jain_s_index_is_one_for_shares_in_proportion_to_weights() -> None:
    assert jain([(10.0, 1), (20.0, 2), (30.0, 3)]) == pytest.approx(1.0)
    assert jain([(30.0, 1), (0.0, 1), (0.0, 1)]) == pytest.approx(1 / 3)
    assert jain([(10.0, 1), (10.0, 3)]) == pytest.approx((10 + 10 / 3) ** 2 / (2 * (100 + 100 / 9)))
    assert jain([]) is None and jain([(0.0, 1)]) is None


def test_percentiles_are_nearest_rank() -> None:
    spread = Spread.of([float(value) for value in range(1, 101)])
    assert (spread.mean, spread.p50, spread.p99) == (50.5, 50.0, 99.0)
    assert Spread.of([]) == Spread(None, None, None)


def test_a_replay_s_figures_are_its_log_s() -> None:
    trace = read_trace(ITP)
    result = Simulation(trace_scenario(trace)).run()
    figures = policy_figures("derived", result)
    assert figures.jobs == figures.completed == len(trace.jobs)
    submitted = {e.job: e.t for e in result.log if e.decision is Decision.SUBMIT}
    started: dict[object, float] = {}
    for entry in result.log:
        if entry.decision is Decision.START:
            started.setdefault(entry.job, entry.t)
    waits = sorted(started[job] - at for job, at in submitted.items())
    assert figures.wait.mean == pytest.approx(sum(waits) / len(waits))
    assert figures.wait.p99 == waits[-1]  # 40 jobs: the 99th percentile is the longest wait
    ends = [e.t for e in result.log if e.decision is Decision.FINISH]
    assert figures.makespan_s == max(ends) - min(submitted.values())
    [team] = figures.teams
    held = sum(job.gpus * job.duration_s for job in trace.jobs) / 3600
    assert team.gpu_hours_in_guarantee + team.gpu_hours_borrowed == pytest.approx(held)
    assert figures.fairness == pytest.approx(1.0)  # one team


def test_topoq_simulate_compares_policies_on_the_same_arrivals(tmp_path: Path) -> None:
    whole, half = tmp_path / "whole.yaml", tmp_path / "half.yaml"
    whole.write_text(POLICY.format(name="whole", nodes=16))
    half.write_text(POLICY.format(name="half", nodes=8))
    args = ("simulate", "--trace", ITP, "--policy", whole, "--policy", half, "-o", "json")
    one_at_a_time = topoq(*args)
    assert one_at_a_time.returncode == 0, one_at_a_time.stderr
    figures = json.loads(one_at_a_time.stdout)
    assert [one["policy"] for one in figures] == ["whole.yaml", "half.yaml"]
    assert all(one["completed"] == one["jobs"] == 40 for one in figures)
    by_name = {one["policy"]: one for one in figures}
    assert by_name["half.yaml"]["wait"]["mean"] > by_name["whole.yaml"]["wait"]["mean"]
    at_once = topoq(*args, "--jobs", "2")
    assert at_once.returncode == 0, at_once.stderr
    assert json.loads(at_once.stdout) == figures  # the same replays, in processes of their own
    table = topoq("simulate", "--trace", ITP, "--policy", whole, "--policy", half)
    assert table.returncode == 0 and "The same arrivals under each policy" in table.stdout
    refused = topoq(*args[:-2], "--log", tmp_path / "log.jsonl")
    assert refused.returncode == 2 and "one run's" in refused.stderr


CLUSTER = """\
apiVersion: topoq.io/v1
kind: Cluster
metadata: {name: two-spines}
generate: 2x8x16 p5.48xlarge
"""


def test_topoq_simulate_compares_placements_under_the_cost_model(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    args = ("simulate", "--trace", ITP, "--cluster", cluster, "-o", "json")
    ran = topoq(*args, "--placement", "topoq", "--placement", "first-fit")
    assert ran.returncode == 0, ran.stderr
    topoq_s, first_fit = json.loads(ran.stdout)
    assert (topoq_s["policy"], first_fit["policy"]) == ("topoq", "first-fit")
    assert topoq_s["at_best_span"] == 1.0  # every multi-node gang as tight as it could be
    assert first_fit["at_best_span"] < 0.5  # the topology-oblivious baseline spreads them
    assert topoq_s["slowdown"]["mean"] == pytest.approx(1.0)
    assert first_fit["slowdown"]["p99"] > 1.0  # spread gangs run longer
    plain = topoq(*args, "--placement", "first-fit", "--placement", "kueue-like", "--no-cost-model")
    assert plain.returncode == 0, plain.stderr
    assert all(one["slowdown"]["mean"] is None for one in json.loads(plain.stdout))


def test_topoq_simulate_refuses_a_bad_network_file_naming_the_field(tmp_path: Path) -> None:
    network = tmp_path / "network.yaml"
    network.write_text("stages:\n  - latencyUs: 5\n    oversubscription: 0\n")
    refused = topoq("simulate", "--trace", ITP, "--network", network)
    assert refused.returncode == 2
    assert "stages[0].oversubscription" in refused.stderr and "Traceback" not in refused.stderr
    missing = topoq("simulate", "--trace", ITP, "--network", tmp_path / "none.yaml")
    assert missing.returncode == 2 and missing.stderr.count("none.yaml") == 1, missing.stderr
    network.write_text("nodeGBps: 50\n")
    both = topoq("simulate", "--trace", ITP, "--network", network, "--no-cost-model")
    assert both.returncode == 2 and "--no-cost-model" in both.stderr
    slower = topoq("simulate", "--trace", ITP, "--network", network, "-o", "json")
    assert slower.returncode == 0, slower.stderr
    several = topoq(
        "simulate", SCENARIOS / "reclaim.yaml", "--placement", "topoq", "--placement", "first-fit"
    )
    assert several.returncode == 2 and "--trace" in several.stderr


def test_a_scenario_under_the_cost_model_writes_its_log_as_json_lines() -> None:
    """A gang slowed by contention logs its slow-down as a plain number: the model works it
    out from numpy's domain sizes, and ``-o jsonl`` once failed on the numpy float with a
    traceback."""
    ran = topoq("simulate", SCENARIOS / "starving-borrower.yaml", "--cost-model", "-o", "jsonl")
    assert ran.returncode == 0, ran.stderr
    log = [json.loads(line) for line in ran.stdout.splitlines()]
    slowed = [entry["slowdown"] for entry in log if entry.get("slowdown", 1.0) > 1.0]
    assert slowed and all(isinstance(slowdown, float) for slowdown in slowed)


def test_the_placement_option_offers_every_placement_mode() -> None:
    assert [option.value for option in PlacementOption] == [mode.value for mode in PlacementMode]


def test_time_limits_from_the_durations_let_waiting_jobs_know_when_they_start(
    tmp_path: Path,
) -> None:
    half = tmp_path / "half.yaml"
    half.write_text(POLICY.format(name="half", nodes=8))
    args = ("simulate", "--trace", ITP, "--policy", half, "--no-cost-model", "-o", "jsonl")
    without = [json.loads(line) for line in topoq(*args).stdout.splitlines()]
    assert not any("eta" in entry for entry in without)  # no time limit: no expected start
    ran = topoq(*args, "--time-limit-factor", "2")
    assert ran.returncode == 0, ran.stderr
    log = [json.loads(line) for line in ran.stdout.splitlines()]
    assert any("eta" in entry for entry in log if entry["decision"] == "wait")
    assert sum(entry["decision"] == "finish" for entry in log) == 40  # none hit its limit
    assert topoq(*args, "--time-limit-factor", "0.5").returncode == 2
    alone = topoq("simulate", SCENARIOS / "reclaim.yaml", "--time-limit-factor", "2")
    assert alone.returncode == 2 and "--trace" in alone.stderr


def test_one_run_under_the_cost_model_says_how_placement_slowed_it(tmp_path: Path) -> None:
    cluster = tmp_path / "cluster.yaml"
    cluster.write_text(CLUSTER)
    ran = topoq("simulate", "--trace", ITP, "--cluster", cluster, "--placement", "first-fit")
    assert ran.returncode == 0, ran.stderr
    [line] = [line for line in ran.stdout.splitlines() if line.startswith("Placement slow-down")]
    assert "of multi-node gangs at their best span" in line
    plain = topoq("simulate", "--trace", ITP, "--no-cost-model")
    assert "Placement slow-down" not in plain.stdout


def test_the_comparison_has_a_column_per_policy_and_fits_eighty_columns(tmp_path: Path) -> None:
    """Ten figures side by side were cut on a terminal; a column per policy and a row per
    figure keeps every name and figure whole on 80 columns."""
    trace = read_trace(ITP)
    figures = []
    for nodes in (16, 12, 8):
        policy = tmp_path / f"guarantee-{nodes}.yaml"
        policy.write_text(POLICY.format(name=f"g{nodes}", nodes=nodes))
        result = Simulation(trace_scenario(trace, policy=load_policy(policy))).run()
        figures.append(policy_figures(policy.name, result))

    def summary_on(width: int) -> str:
        console = Console(width=width, record=True)
        with console.capture() as captured:
            print_comparison(console, figures)
        return captured.get().split("Per team")[0]

    summary = summary_on(80)  # cells wrap: nothing is cut
    assert max(len(line) for line in summary.splitlines()) <= 80, summary
    assert "…" not in summary, summary
    wider = summary_on(100).splitlines()
    header = next(line for line in wider if "guarantee-16.yaml" in line)
    assert "guarantee-12.yaml" in header and "guarantee-8.yaml" in header
    for one in figures:
        assert f"{one.completed} of {one.jobs}" in summary
    row = next(line for line in wider if line.strip().startswith("Fragmented"))
    assert row.count("%") + row.count("-") >= 3  # a figure under each policy
