"""The placement benchmark runner keeps working: a tiny run checked for decisions, not timings."""

from __future__ import annotations

import pytest

from benchmarks.baseline_placement import ScanningPlacer
from benchmarks.placement import Report, baseline_decision, main, run, topoq_decision
from benchmarks.scenarios import GANG_GPUS, MODES, gangs, make_cluster
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import find_placement
from topoq.core.tree import build_tree
from topoq.testing.builders import gpu_pods


@pytest.fixture(scope="module")
def report() -> Report:
    return run(sizes=[64], repeat=3, baseline_repeat=1)


def test_every_gang_and_mode_gets_a_row_with_a_decision(report: Report) -> None:
    measured = {(row.gang_gpus, row.mode) for row in report.rows}
    assert {gpus for gpus, _ in measured} == set(GANG_GPUS)
    assert {mode for _, mode in measured} == set(MODES)
    for row in report.rows:
        assert isinstance(row.admitted, bool)
        assert (row.spans == "-") != row.admitted


def test_the_baseline_reaches_the_same_decisions_as_topoq(report: Report) -> None:
    assert [row for row in report.rows if not row.agree] == []


def test_a_tiny_run_admits_some_gangs_and_refuses_others(report: Report) -> None:
    assert {row.admitted for row in report.rows} == {True, False}


def test_cluster_stats_report_half_the_gpus_used(report: Report) -> None:
    (stats,) = report.clusters
    assert stats.nodes == 64
    assert 0.4 <= stats.used_gpu_fraction <= 0.6
    assert stats.peak_mib > 0


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_baseline_places_the_same_nodes_as_topoq_on_other_usage_draws(seed: int) -> None:
    cluster = make_cluster(512, seed)
    tree = build_tree(cluster.nodes, cluster.spec)
    ledger = CapacityLedger.with_usage(tree, cluster.used, strict=True)
    placer = ScanningPlacer(cluster.nodes, cluster.spec, cluster.used)
    for gang in gangs(cluster):
        result = find_placement(ledger, gang.workload)
        takes = placer.place(gang.workload.pod_sets[0])
        topoq = [(a.node, a.count) for a in result.pod_sets[0].assignments]
        baseline = [(placer.paths[node][-1], pods) for node, pods in takes or ()]
        assert topoq == baseline, (gang.gpus, gang.mode)
        assert topoq_decision(tree, result) == baseline_decision(placer, takes)


def test_the_baseline_refuses_requests_it_does_not_model() -> None:
    cluster = make_cluster(64, 0)
    placer = ScanningPlacer(cluster.nodes, cluster.spec, cluster.used)
    with pytest.raises(ValueError, match="required or preferred"):
        placer.place(gpu_pods(2))


def test_main_prints_the_tables_and_the_target_line(capsys: pytest.CaptureFixture[str]) -> None:
    main(["--sizes", "64", "--repeat", "2", "--baseline-repeat", "1"])
    printed = capsys.readouterr().out
    assert "baseline p50 µs" in printed
    assert "512-GPU gang on 8,192 nodes: not measured" in printed
