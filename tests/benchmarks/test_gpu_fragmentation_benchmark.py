"""``benchmarks.gpu_fragmentation`` on the whole openb default list, one seed, so that the
runner cannot rot: every policy places every arrival it can on devices that hold it (the run
checks its books against the room's, or the ledger's), and the policies rank as FGD's paper
ranks them, with topoq's packing — the scheduler's own placement (``place_workload`` on a
ledger that packs by fragmentation) — leaving the least GPU unallocated."""

from __future__ import annotations

import pytest

from benchmarks import gpu_fragmentation as bench
from topoq.sim.traces import read_openb_nodes, read_openb_requests

CSV = bench.OPENB / "csv"


@pytest.mark.skipif(not CSV.is_dir(), reason="the shared openb trace is not here")
def test_the_policies_rank_as_fgd_s_paper_ranks_them() -> None:
    nodes = read_openb_nodes(CSV / bench.NODE_LIST)
    requests = read_openb_requests(CSV / "openb_pod_list_default.csv")
    cluster = bench.cluster_of(nodes)
    asks = bench.asks_of(requests, cluster.models)
    mix = bench.typical_tasks((ask for ask in asks if ask is not None), len(cluster.models))
    assert cluster.room.capacity_milli == 6_212_000 and len(cluster.room.cpu) == 1213
    runs = {policy: bench.run(cluster, asks, mix, policy, 42) for policy in bench.POLICIES[:3]}
    pod_sets = [bench.pod_set_of(request) for request in requests]
    runs["topoq"] = bench.run_placed(bench.placed_tree(nodes), pod_sets, asks, 42)
    assert len({run.pods for run in runs.values()}) == 1  # the same arrivals for each
    unallocated = {policy: run.unallocated_pct for policy, run in runs.items()}
    assert unallocated["random"] > unallocated["best fit"] > unallocated["FGD"]
    assert unallocated["FGD"] > unallocated["topoq"]
    assert all(0 < run.failed < run.pods for run in runs.values())
    published = bench.published(
        bench.OPENB / "fgd_expected_results" / "analysis_allo_discrete.csv.gz",
        "openb_pod_list_default",
    )
    assert published == pytest.approx({"random": 13.70, "best fit": 7.14, "FGD": 4.77}, abs=0.01)
    shown = bench.table(list(runs.values()), published, markdown=True)
    assert "| topoq | 1 |" in shown and "| 4.77 |" in shown
