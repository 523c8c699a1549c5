"""The communication cost model: 1 at the tightest placement on an empty cluster, growing with
how the gang is spread and with the traffic of other jobs on oversubscribed uplinks."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoq.core.tree import build_tree
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId
from topoq.sim.engine import Simulation
from topoq.sim.log import Decision, LogEntry
from topoq.sim.network import (
    NetworkModel,
    NetworkState,
    Stage,
    default_communication_share,
    read_network,
)
from topoq.sim.traces import Trace, TraceFormat, TraceJob, cluster_of, trace_scenario

# 2 spines x 8 blocks x 16 nodes of 8 GPUs; levels spine, block, host
NODES, TOPOLOGY = cluster_of(256)
BLOCK = 16
SPINE = 128


def _state(model: NetworkModel | None = None) -> NetworkState:
    return NetworkState(build_tree(NODES, TOPOLOGY), model)


def _start(state: NetworkState, job: str, on_node: dict[int, int], share: float) -> set[JobId]:
    """``job`` with one pod per node (its GPUs there)."""
    return state.start(JobId(job), on_node, list(on_node.values()), share)


def _whole(nodes: range | list[int]) -> dict[int, int]:
    return dict.fromkeys(nodes, 8)


def test_the_tightest_placement_alone_runs_as_long_as_its_trace_says() -> None:
    state = _state()
    _start(state, "a", _whole(range(8)), 0.2)  # 8 nodes in one block
    assert state.slowdown(JobId("a")) == pytest.approx(1.0)
    _start(state, "b", _whole(range(SPINE, SPINE + 64)), 0.2)  # 4 whole blocks
    assert state.slowdown(JobId("b")) == pytest.approx(1.0)


def test_spreading_a_gang_over_more_domains_makes_it_slower() -> None:
    state = _state()
    _start(state, "one-block", _whole(range(8)), 0.2)
    _start(state, "two-blocks", _whole([*range(16, 20), *range(32, 36)]), 0.2)
    _start(
        state,
        "eight-blocks",
        _whole([48 + 16 * b for b in range(5)] + [SPINE, SPINE + 16, SPINE + 32]),
        0.2,
    )
    one, two, eight = (
        state.slowdown(JobId(j)) for j in ("one-block", "two-blocks", "eight-blocks")
    )
    assert one == pytest.approx(1.0)
    assert 1.0 < two < eight


def test_jobs_crossing_an_oversubscribed_uplink_slow_each_other_down() -> None:
    state = _state()
    # each job: 32 nodes in spine 0 and 32 in spine 1, so both leave both spines
    first = _whole([*range(0, 32), *range(SPINE, SPINE + 32)])
    second = _whole([*range(32, 64), *range(SPINE + 32, SPINE + 64)])
    assert _start(state, "first", first, 0.3) == set()
    alone = state.slowdown(JobId("first"))
    assert _start(state, "second", second, 0.3) == {JobId("first")}
    shared = state.slowdown(JobId("first"))
    assert shared > alone
    assert state.slowdown(JobId("second")) == pytest.approx(shared)
    assert state.end(JobId("second")) == {JobId("first")}
    assert state.slowdown(JobId("first")) == pytest.approx(alone)


def test_non_blocking_stages_are_never_contended() -> None:
    state = _state(NetworkModel(stages=(Stage(5.0), Stage(10.0), Stage(20.0))))
    first = _whole([*range(0, 32), *range(SPINE, SPINE + 32)])
    second = _whole([*range(32, 64), *range(SPINE + 32, SPINE + 64)])
    _start(state, "first", first, 0.3)
    alone = state.slowdown(JobId("first"))
    assert _start(state, "second", second, 0.3) == set()
    assert state.slowdown(JobId("first")) == pytest.approx(alone)


def test_a_job_that_does_not_communicate_is_never_slowed() -> None:
    state = _state()
    _start(state, "spread", _whole([0, 40, SPINE + 3]), 0.0)
    assert state.slowdown(JobId("spread")) == 1.0
    assert default_communication_share(8) == 0.0
    assert default_communication_share(64) == pytest.approx(0.1)
    assert default_communication_share(256) == pytest.approx(0.2)


def test_a_partial_node_gang_is_compared_with_its_pods_packed() -> None:
    state = _state()
    state.start(JobId("packed"), {0: 8}, [1] * 8, 0.2)  # 8 one-GPU pods on one node
    assert state.slowdown(JobId("packed")) == pytest.approx(1.0)
    _start(state, "scattered", dict.fromkeys(range(16, 24), 1), 0.2)
    assert state.slowdown(JobId("scattered")) > 1.0


def _replay(jobs: list[TraceJob], network: NetworkModel | None) -> dict[str, dict[str, LogEntry]]:
    """The trace replayed on 2 blocks of 16 nodes; each job's start and finish entries."""
    trace = Trace("test", TraceFormat.SYNTHETIC, tuple(jobs), {"t": 32})
    result = Simulation(trace_scenario(trace, cluster_of(32)), network).run()
    found: dict[str, dict[str, LogEntry]] = {}
    for entry in result.log:
        if entry.job is not None and entry.decision in (Decision.START, Decision.FINISH):
            found.setdefault(entry.job, {})[entry.decision.value] = entry
    return found


def _admissions(jobs: list[TraceJob], network: NetworkModel | None) -> list[LogEntry]:
    trace = Trace("test", TraceFormat.SYNTHETIC, tuple(jobs), {"t": 32})
    result = Simulation(trace_scenario(trace, cluster_of(32)), network).run()
    return [entry for entry in result.log if entry.decision is Decision.ADMIT]


BLOCK_UPLINKS_4_TO_1 = NetworkModel(stages=(Stage(5.0), Stage(10.0, 4.0), Stage(20.0, 8.0)))


def test_a_replayed_gang_spread_over_two_blocks_runs_longer_than_its_trace_says() -> None:
    jobs = [
        TraceJob("a", "t", 0.0, 1000.0, 12 * 8, 2),  # 12 nodes: one block
        TraceJob("x", "t", 0.0, 5000.0, 12 * 8, 3),  # 12 nodes: the other block
        TraceJob("b", "t", 1.0, 1000.0, 8 * 8, 4),  # 8 nodes: 4 left in each block
    ]
    plain = _replay(jobs, None)
    assert plain["b"]["finish"].t - plain["b"]["start"].t == pytest.approx(1000.0)
    assert plain["b"]["start"].slowdown is None

    modelled = _replay(jobs, BLOCK_UPLINKS_4_TO_1)
    a, b = modelled["a"], modelled["b"]
    assert a["finish"].t - a["start"].t == pytest.approx(1000.0)  # tight: as the trace says
    assert a["start"].slowdown == pytest.approx(1.0)
    slowdown = b["start"].slowdown
    assert slowdown is not None and slowdown > 1.0
    assert b["finish"].t - b["start"].t == pytest.approx(1000.0 * slowdown)
    assert b["finish"].slowdown == pytest.approx(slowdown)
    assert b["finish"].document()["slowdown"] == pytest.approx(slowdown, rel=1e-5)
    admitted = next(e for e in _admissions(jobs, BLOCK_UPLINKS_4_TO_1) if e.job == "b")
    assert admitted.best_span == {label: len(names) for label, names in admitted.placement.items()}
    assert admitted.document()["best_span"]["topology.k8s.aws/network-node-layer-2"] == 2


def test_a_network_file_sets_the_model_and_a_bad_one_says_which_field(tmp_path: Path) -> None:
    good = tmp_path / "network.yaml"
    good.write_text(
        "nodeGBps: 100\nstages:\n  - latencyUs: 3\n  - latencyUs: 6\n    oversubscription: 4\n"
    )
    model = read_network(good)
    assert model.node_gb_s == 100.0
    assert model.nvlink_gb_s == NetworkModel().nvlink_gb_s
    assert model.stages == (Stage(3.0), Stage(6.0, 4.0))
    bad = tmp_path / "bad.yaml"
    for text, said in (
        ("stages:\n  - latencyUs: 3\n    oversubscription: 0.5\n", "stages[0].oversubscription"),
        ("nodeGBps: fast\n", "nodeGBps: expected a number"),
        ("nodeGbps: 100\n", "nodeGBps"),
        ("stages:\n  - oversubscription: 2\n", "stages[0].latencyUs"),
    ):
        bad.write_text(text)
        with pytest.raises(InvalidInputError) as refused:
            read_network(bad)
        assert str(bad) in str(refused.value) and said in str(refused.value)
