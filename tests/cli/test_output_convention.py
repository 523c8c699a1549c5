"""One output convention for every verb: ``-o table|json|yaml``, counted nouns, byte amounts as
Kubernetes quantities, and a reader that closes the pipe early (``| head``) is no error. The
offline verbs here; the server verbs in test_server_cli.py, against a real server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from topoq.cli.output import byte_quantity, counted, readable_quantity

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "examples" / "kubernetes"
WORKLOADS = ROOT / "examples" / "workloads"
POLICY = ROOT / "examples" / "policies" / "policy.yaml"
COMMAND = [sys.executable, "-m", "topoq"]


@pytest.mark.parametrize(
    ("amount", "shown"),
    [
        (1536 * 2**30, "1.5Ti"),
        (512 * 2**30, "512Gi"),
        (2**40, "1Ti"),
        (2 * 2**40, "2Ti"),
        (1025 * 2**30, "1025Gi"),  # exact in Gi; 1.0009765625Ti is not two decimals
        (1536 * 2**20, "1.5Gi"),
        (123456789, "117.74Mi"),  # no unit holds it to two decimals: rounded
        (1000, "1000"),
        (0, "0"),
    ],
)
def test_bytes_are_shown_in_the_largest_binary_unit(amount: int, shown: str) -> None:
    assert byte_quantity(amount) == shown


def test_an_apis_amount_is_shown_for_people_and_other_resources_as_they_are() -> None:
    assert readable_quantity("memory", "1536Gi") == "1.5Ti"
    assert readable_quantity("ephemeral-storage", "1000000000") == "953.67Mi"
    assert readable_quantity("cpu", "192") == "192"
    assert readable_quantity("nvidia.com/gpu", "8") == "8"
    assert readable_quantity("memory", "not a quantity") == "not a quantity"


def test_nouns_are_counted_in_the_singular_for_one() -> None:
    assert [counted(n, "job") for n in (0, 1, 2)] == ["0 jobs", "1 job", "2 jobs"]
    assert counted(2, "policy", "policies") == "2 policies"


def topoq(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*COMMAND, *map(str, args)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )


def parsed(output: str, *args: str | Path) -> object:
    answer = topoq(*args, "-o", output)
    assert answer.returncode == 0, answer.stderr
    return json.loads(answer.stdout) if output == "json" else yaml.safe_load(answer.stdout)


CLUSTER = ("--nodes", K8S / "nodes.json", "--topology", K8S / "topology.yaml")


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_the_offline_verbs_print_json_and_yaml_of_the_same_document(output: str) -> None:
    placed = parsed(output, "place", *CLUSTER, "-w", WORKLOADS / "required-block.yaml")
    assert isinstance(placed, dict) and placed["admitted"] is True
    assert placed["podsets"][0]["assignment"][0]["firstRank"] == 0
    shown = parsed(output, "topology", "show", *CLUSTER)
    assert isinstance(shown, dict) and shown["accelerator"] == "GPU"
    assert shown["levels"][0]["label"] == "topology.k8s.aws/network-node-layer-1"
    valid = parsed(output, "topology", "validate", *CLUSTER)
    assert isinstance(valid, dict) and valid["valid"] is True and valid["nodes"] > 0
    assert parsed(output, "version") == {"version": topoq("version").stdout.strip()}


def test_policy_lint_prints_its_findings_as_yaml_and_still_exits_1_on_errors() -> None:
    """The example policy guarantees more GPUs than the small example cluster has."""
    lint = ("policy", "lint", "--policy", POLICY, *CLUSTER)
    as_json, as_yaml = topoq(*lint, "-o", "json"), topoq(*lint, "-o", "yaml")
    assert (as_json.returncode, as_yaml.returncode) == (1, 1), as_yaml.stderr
    found = yaml.safe_load(as_yaml.stdout)
    assert found == json.loads(as_json.stdout)
    assert found["valid"] is False and found["errors"] >= 1
    assert {"severity", "code", "message", "hint"} <= set(found["findings"][0])


def test_an_output_no_verb_has_is_refused_as_a_usage_error() -> None:
    answer = topoq("place", *CLUSTER, "-w", WORKLOADS / "required-block.yaml", "-o", "xml")
    assert answer.returncode == 2 and answer.stdout == ""
    assert "'xml' is not one of 'table', 'json', 'yaml'" in answer.stderr, answer.stderr


def test_the_tables_count_in_the_singular_for_one() -> None:
    one_node = topoq("topology", "validate", *CLUSTER).stdout
    assert "nodes in 4 levels" in one_node and " 1 domains" not in one_node, one_node
    assert ": 1 domain\n" in one_node, one_node  # the one layer-1 domain


BIG_CLUSTER = """\
apiVersion: topoq.io/v1
kind: Cluster
metadata: {name: big}
levels:
  - topology.k8s.aws/network-node-layer-1
  - topology.k8s.aws/network-node-layer-2
  - topology.k8s.aws/network-node-layer-3
  - kubernetes.io/hostname
generate:
  shape: [2, 4, 16, 16]
  instance_type: p5.48xlarge
"""


@pytest.mark.parametrize("output", ["table", "json", "yaml"])
def test_a_reader_that_closes_the_pipe_early_is_no_error(tmp_path: Path, output: str) -> None:
    """`topoq topology show … | head -1`: far more than a pipe holds (64 KiB) is written after
    head has gone; the verb ends with exit 0 and nothing on standard error."""
    cluster = tmp_path / "big.yaml"
    cluster.write_text(BIG_CLUSTER)
    args = ("topology", "show", "--nodes", cluster, "--depth", "4", "-o", output)
    assert len(topoq(*args).stdout.encode()) > 65536 + 8192  # the pipe and a buffer fill
    writer = subprocess.Popen(
        [*COMMAND, *map(str, args)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert writer.stdout is not None
    head = subprocess.run(["head", "-1"], stdin=writer.stdout, capture_output=True, check=True)
    writer.stdout.close()
    errors = writer.communicate(timeout=120)[1].decode()
    assert writer.returncode == 0, errors
    assert "Traceback" not in errors and "Broken pipe" not in errors, errors
    assert "Exception ignored" not in errors, errors
    first = {"table": "big: 2048 nodes, 16384/16384 GPU free", "json": "{", "yaml": "topology: big"}
    assert head.stdout.decode().strip() == first[output]
