"""Every example workload placed on the example Kubernetes cluster lands where its comment says."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoq.core.ledger import CapacityLedger
from topoq.core.placement import find_placement
from topoq.core.tree import build_tree
from topoq.discovery.jobfile import load_workload
from topoq.discovery.sources import load_cluster

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "examples" / "kubernetes"
LAYER2 = "topology.k8s.aws/network-node-layer-2"
LAYER3 = "topology.k8s.aws/network-node-layer-3"

# file → pod set → the blocks (layer-3) its pods use, as the file's comment explains
EXPECTED = {
    "required-block.yaml": {"workers": {"nn-3a"}},
    "preferred-block.yaml": {"workers": {"nn-3c", "nn-3d"}},
    "required-and-preferred.yaml": {"workers": {"nn-3c", "nn-3d"}},
    "unconstrained.yaml": {"trials": None},
    "slices-one-layer.yaml": {"workers": {"nn-3a", "nn-3b", "nn-3c"}},
    "slices-two-layers.yaml": {"workers": {"nn-3a", "nn-3c", "nn-3d"}},
    "group-launcher-workers.yaml": {"launcher": {"nn-3a"}, "workers": {"nn-3a", "nn-3b"}},
    "spread.yaml": {"replicas": {"nn-3a", "nn-3b", "nn-3c", "nn-3d"}},
    "llama-70b-job.yaml": {
        "launcher": {"nn-3a"},
        "workers": {"nn-3a", "nn-3b", "nn-3c"},
        "evaluators": {"nn-3c", "nn-3d"},
    },
    "hyperpod-pytorch-job.yaml": {"worker": {"nn-3a"}},
}


@pytest.fixture(scope="module")
def ledger() -> CapacityLedger:
    cluster = load_cluster(
        K8S / "nodes.json", topology=K8S / "topology.yaml", pods=K8S / "pods.json"
    )
    return CapacityLedger.with_usage(build_tree(cluster.nodes, cluster.topology), cluster.used)


def test_every_example_workload_is_covered() -> None:
    files = {path.name for path in (ROOT / "examples" / "workloads").glob("*.yaml")}
    assert files == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_workload_lands_where_documented(ledger: CapacityLedger, name: str) -> None:
    result = find_placement(ledger, load_workload(ROOT / "examples" / "workloads" / name))
    assert result.admitted, [o.diagnosis for o in result.pod_sets]
    for outcome in result.pod_sets:
        blocks = {a.domain[LAYER3] for a in outcome.assignments}
        expected = EXPECTED[name][outcome.name]
        if expected is not None:
            assert blocks == expected, outcome.name
        assert sum(a.count for a in outcome.assignments) == outcome.count
