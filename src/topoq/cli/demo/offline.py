"""``topoq demo --offline``: the example cluster, a few jobs placed one after another, and the
reasons — no server, the placement core in-process."""

from __future__ import annotations

from importlib.resources import files

from rich.rule import Rule

from topoq.cli.console import make_console
from topoq.cli.render import print_placement, topology_tree
from topoq.core.ledger import CapacityLedger
from topoq.core.placement import place_workload
from topoq.core.tree import build_tree
from topoq.discovery.documents import parse_document
from topoq.discovery.jobfile import workload_from_document
from topoq.discovery.sources import load_cluster


def run_offline_demo() -> None:
    console = make_console()
    cluster = load_cluster(None)
    ledger = CapacityLedger.with_usage(build_tree(cluster.nodes, cluster.topology), cluster.used)
    console.print(Rule("topoq demo: topology-aware gang placement"))
    console.print("The example cluster (2 spines × 4 blocks × 8 p5.48xlarge), some GPUs in use:")
    console.print(topology_tree(ledger, ledger.tree.depth - 1))
    demo = files("topoq") / "data" / "demo"
    for entry in sorted(demo.iterdir(), key=lambda item: item.name):
        if not (entry.name.endswith(".yaml") and entry.name[:1].isdigit()):
            continue  # the numbered workloads; cluster.yaml and policy.yaml are the server demo's
        text = entry.read_text(encoding="utf-8")
        source = f"demo/{entry.name}"
        workload = workload_from_document(parse_document(text, source=source), source=source)
        console.print(Rule(workload.name))
        for line in text.splitlines():
            if not line.startswith("#"):
                break
            console.print(f"[dim]{line}[/]")
        result, ledger = place_workload(ledger, workload)
        print_placement(console, result, cluster.topology.levels)
    console.print(Rule("after placement"))
    console.print(topology_tree(ledger, ledger.tree.depth - 1))
    console.print(
        "\nTry it on your own files:\n"
        "  topoq topology show --nodes examples/kubernetes/nodes.json "
        "--topology examples/kubernetes/topology.yaml\n"
        "  topoq place --workload src/topoq/data/demo/1-llama-pretrain.yaml --output json\n"
        "  topoq --help"
    )
