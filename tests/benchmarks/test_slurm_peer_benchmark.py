"""The Slurm-peer benchmark's measures, on hand-made runs (the benchmark itself runs real
Slurm for minutes: ``python -m benchmarks.slurm_peer``)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from benchmarks.slurm_peer import Gang, Ran, leaf_of, run_simulated_mode, stream, summarize

NODES = [f"n{i:02d}" for i in range(16)]  # 4 leaves of 4, one spine of 4 leaves
LEAF = leaf_of(NODES, 4)


def ran(name: str, nodes: list[str], submitted: float, started: float, ended: float) -> Ran:
    return Ran(
        Gang(name, len(nodes), submitted, ended - started), submitted, started, ended, tuple(nodes)
    )


def test_spans_count_leaves_and_spines_against_the_fewest_that_hold_the_gang() -> None:
    runs = [
        ran("tight", ["n00", "n01"], 0, 0, 10),  # one leaf: ideal
        ran("split", ["n03", "n04"], 0, 0, 10),  # two leaves for two nodes: not ideal
        ran("big", NODES[4:12], 0, 0, 10),  # eight nodes need two leaves: ideal
    ]
    summary = summarize("x", runs, LEAF, total_gpus=128)
    assert summary.mean_leaves == pytest.approx((1 + 2 + 2) / 3)
    assert summary.mean_spines == 1
    assert summary.ideal_share == pytest.approx(2 / 3)


def test_waits_makespan_and_gpus_idle_while_a_gang_waited() -> None:
    runs = [
        ran("first", NODES[:4], 0, 0, 10),  # 32 GPUs busy 0–10 s
        ran("second", NODES[:16], 2, 10, 20),  # waits 2–10 s while 96 GPUs are idle
    ]
    summary = summarize("x", runs, LEAF, total_gpus=128)
    assert summary.mean_wait_s == pytest.approx(4.0)
    assert summary.p95_wait_s == pytest.approx(8.0)
    assert summary.makespan_s == pytest.approx(20.0)
    assert summary.idle_gpu_hours_waiting == pytest.approx(96 * 8 / 3600)


def test_the_stream_is_the_same_for_both_schedulers() -> None:
    assert stream(50, 0.6) == stream(50, 0.6)
    assert all(1 <= gang.nodes <= 16 and 3 <= gang.duration_s <= 15 for gang in stream(50, 0.6))


def test_the_virtual_clock_run_places_every_gang_of_the_stream_whole(tmp_path: Path) -> None:
    gangs = stream(40, 0.6)
    runs = run_simulated_mode(gangs, NODES, 4, tmp_path)
    assert sorted(r.gang.name for r in runs) == sorted(g.name for g in gangs)
    for r in runs:
        assert len(r.nodes) == r.gang.nodes and set(r.nodes) <= set(NODES)
        assert r.started >= r.submitted and r.ended == pytest.approx(r.started + r.gang.duration_s)
    for first, second in itertools.combinations(runs, 2):  # no node is booked twice at once
        if set(first.nodes) & set(second.nodes):
            assert first.ended <= second.started + 1e-6 or second.ended <= first.started + 1e-6
