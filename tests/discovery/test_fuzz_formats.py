"""A fuzz test per input format: mutated, garbage, huge and deep inputs give an
``InvalidInputError`` (never another exception) within a second each.

Each format starts from a valid example; hypothesis replaces, deletes or adds values anywhere
in it (numbers too large, not finite, of the wrong type; strings too long; nesting too deep)
and writes it as JSON or YAML, or feeds plain garbage text. Reading it either succeeds or
raises ``InvalidInputError`` — a crash or a hang is a bug (``deadline`` fails a slow one).
"""

from __future__ import annotations

import contextlib
import copy
import json
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topoq.discovery.aws import cluster_from_instance_topology
from topoq.discovery.clusterfile import cluster_from_document
from topoq.discovery.documents import documents_in_text, parse_document
from topoq.discovery.jobfile import workload_from_document
from topoq.discovery.kubernetes import nodes_from_nodelist, topology_from_kueue, usage_from_podlist
from topoq.discovery.policy import policy_from_document
from topoq.discovery.policy_hyperpod import policy_from_hyperpod
from topoq.discovery.slurm import cluster_from_slurm, parse_topology_conf
from topoq.domain.errors import InvalidInputError
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.sim import load_scenario

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
FUZZ = settings(
    max_examples=60,
    deadline=1000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def example(relative: str) -> Any:
    return parse_document((EXAMPLES / relative).read_text(encoding="utf-8"), source=relative)


def nodelist() -> Any:
    document = example("kubernetes/nodes.json")
    document["items"] = document["items"][:4]
    return document


def aws_pages() -> Any:
    """The example's pages (back to back in the file) as one JSON list of pages."""
    text = (EXAMPLES / "aws" / "describe-instance-topology.json").read_text(encoding="utf-8")
    return documents_in_text(text, source="aws")


def scenario() -> Any:
    return {
        "apiVersion": "topoq.io/v1",
        "kind": "Scenario",
        "cluster": {"generate": {"shape": [2, 2], "instance_type": "p5.48xlarge"}},
        "policy": {"teams": [{"name": "nlp", "quotas": [{"flavor": "p5.48xlarge",
                                                            "instances": 1}]}]},
        "cycle_interval_s": 30,
        "events": [
            {"at": 0, "submit": {"id": "a", "team": "nlp", "runtime_s": 60, "pods": 2, "gpus": 8}},
            {"at": 5, "stream": {"team": "nlp", "every_s": 10, "count": 3, "pods": 1, "gpus": 8,
                                 "runtime_s": 30}},
            {"at": 10, "cancel": "a"},
        ],
    }  # fmt: skip


def read_scenario(document_text: str) -> object:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "scenario.yaml"
        path.write_text(document_text, encoding="utf-8")
        return load_scenario(path)


def read_aws(text: str) -> object:
    return cluster_from_instance_topology(documents_in_text(text, source="t.json"), source="t")


def parsed(reader: Callable[..., object]) -> Callable[[str], object]:
    return lambda text: reader(parse_document(text, source="f"), source="f")


SCHEDULER_CONFIG = example("policies/hyperpod/scheduler-config.json")
QUOTA = example("policies/hyperpod/quota-nlp.json")

FORMATS: dict[str, tuple[Callable[[], Any], Callable[[str], object]]] = {
    "job file": (lambda: example("workloads/llama-70b-job.yaml"), parsed(workload_from_document)),
    "hyperpod job": (
        lambda: example("workloads/hyperpod-pytorch-job.yaml"),
        parsed(workload_from_document),
    ),
    "kueue workload": (
        lambda: example("workloads/slices-two-layers.yaml"),
        parsed(workload_from_document),
    ),
    "policy file": (lambda: example("policies/policy.yaml"), parsed(policy_from_document)),
    "hyperpod quota": (
        lambda: QUOTA,
        lambda text: policy_from_hyperpod(
            SCHEDULER_CONFIG, [parse_document(text, source="q")], source="q"
        ),
    ),
    "hyperpod scheduler config": (
        lambda: SCHEDULER_CONFIG,
        lambda text: policy_from_hyperpod(parse_document(text, source="c"), [QUOTA], source="c"),
    ),
    "cluster file": (
        lambda: example("clusters/small-explicit.yaml"),
        parsed(cluster_from_document),
    ),
    "nodelist": (nodelist, parsed(nodes_from_nodelist)),
    "podlist": (lambda: example("kubernetes/pods.json"), parsed(usage_from_podlist)),
    "kueue topology": (lambda: example("kubernetes/topology.yaml"), parsed(topology_from_kueue)),
    "aws instance topology": (aws_pages, read_aws),
    "scenario": (scenario, read_scenario),
}

HOSTILE_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**18, max_value=10**40),
    st.integers(min_value=1000, max_value=10**8),  # counts and times that make much work
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([0.5, 1e30, -1, 0, 2**63, "1e999999999", "9" * 5000, "NaN", "Infinity"]),
    st.text(max_size=20),
    st.sampled_from(["", " ", "Upper Case", "a/b", "../..", "x" * 300, "\u0000", "500m", "16Gi"]),
)
HOSTILE_VALUES = st.recursive(
    HOSTILE_SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=6,
)


def _containers(value: Any) -> list[Any]:
    """Every mapping and list inside ``value``, ``value`` first."""
    found, stack = [], [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict | list):
            found.append(item)
            stack.extend(item.values() if isinstance(item, dict) else item)
    return found


@st.composite
def mutated(draw: st.DrawFn, document: Any) -> Any:
    """``document`` with a few values replaced, deleted or added, anywhere in it."""
    document = copy.deepcopy(document)
    for _ in range(draw(st.integers(1, 4))):
        containers = _containers(document)
        target = draw(st.sampled_from(containers))
        keys = list(target) if isinstance(target, dict) else list(range(len(target)))
        action = draw(st.sampled_from(["replace", "delete", "add", "deepen"]))
        if not keys or action == "add":
            key = draw(st.text(max_size=10)) if isinstance(target, dict) else None
            value = draw(HOSTILE_VALUES)
            if key is None:
                target.append(value)
            else:
                target[key] = value
            continue
        key = draw(st.sampled_from(keys))
        if action == "delete":
            del target[key]
        elif action == "deepen":
            deep: Any = target[key]
            for _ in range(draw(st.integers(60, 200))):
                deep = [deep]
            target[key] = deep
        else:
            target[key] = draw(HOSTILE_VALUES)
    return document


def as_text(document: Any, form: str) -> str:
    if form == "json":
        return json.dumps(document)
    return yaml.safe_dump(document, sort_keys=False)


def read_or_refuse(read: Callable[[str], object], text: str) -> None:
    """Any exception but ``InvalidInputError`` fails the test, and so does a slow answer."""
    with contextlib.suppress(InvalidInputError):
        read(text)


@pytest.mark.parametrize("name", list(FORMATS))
def test_the_unmutated_example_reads(name: str) -> None:
    make, read = FORMATS[name]
    read(as_text(make(), "json"))
    read(as_text(make(), "yaml"))


@pytest.mark.parametrize("name", list(FORMATS))
@FUZZ
@given(data=st.data(), form=st.sampled_from(["json", "yaml"]))
def test_a_mutated_document_is_read_or_refused_cleanly(
    name: str, data: st.DataObject, form: str
) -> None:
    make, read = FORMATS[name]
    document = data.draw(mutated(make()))
    try:
        text = as_text(document, form)
    except (ValueError, yaml.YAMLError):  # a value JSON itself cannot write
        return
    read_or_refuse(read, text)


GARBAGE = st.one_of(
    st.text(max_size=200),
    st.binary(max_size=200).map(lambda data: data.decode("latin-1")),
    st.sampled_from(
        [
            "",
            "[" * 10_000,
            "{" * 10_000,
            "- " * 10_000,
            "a: &a [1]\nb: *a",
            "a: 1\na: 2",
            '{"a": 1, "a": 2}',
            "!!python/object:os.system x",
            "\ufeff{}",
            "---\n---\n",
            '{"kind": ' + "9" * 5000 + "}",
        ]
    ),
)


@pytest.mark.parametrize("name", list(FORMATS))
@FUZZ
@given(text=GARBAGE)
def test_garbage_is_refused_cleanly(name: str, text: str) -> None:
    read_or_refuse(FORMATS[name][1], text)


def read_slurm(text: str) -> object:
    return cluster_from_slurm(
        parse_topology_conf(text, source="t.conf"), node_resources=Resources({NVIDIA_GPU: 8})
    )


SLURM_EXAMPLES = [
    (EXAMPLES / "slurm" / name).read_text(encoding="utf-8")
    for name in ("topology-tree.conf", "topology-block.conf")
]
SLURM_PIECES = st.sampled_from(
    ["SwitchName=", "Switches=", "Nodes=", "BlockName=", "BlockSizes=", "LinkSpeed=", "[", "]",
     ",", "-", "=", " ", "\n", "#", "n[1-999999999]", "s1", "p5-[001-004]", "0", "x" * 70]
)  # fmt: skip


@st.composite
def slurm_text(draw: st.DrawFn) -> str:
    lines = draw(st.sampled_from(SLURM_EXAMPLES)).splitlines()
    for _ in range(draw(st.integers(1, 4))):
        index = draw(st.integers(0, len(lines) - 1))
        line = lines[index]
        cut = draw(st.integers(0, len(line)))
        piece = "".join(draw(st.lists(SLURM_PIECES, min_size=1, max_size=4)))
        action = draw(st.sampled_from(["insert", "replace", "duplicate", "delete"]))
        if action == "insert":
            lines[index] = line[:cut] + piece + line[cut:]
        elif action == "replace":
            lines[index] = line[:cut] + piece
        elif action == "duplicate":
            lines.insert(index, line)
        else:
            del lines[index]
            lines = lines or [""]
    return "\n".join(lines)


@pytest.mark.parametrize(
    "text",
    [
        "\n".join(f"SwitchName=s{i} Switches=s{i + 1}" for i in range(2000)),
        "SwitchName=s1 Nodes=" + "n," * 100_000 + "n",
        "SwitchName=s1 Nodes=n[1-9999999999]",
        "BlockName=b1 Nodes=" + "[1-2]" * 40,
        "SwitchName=a Switches=b\nSwitchName=b Switches=a",
    ],
    ids=["deep-chain", "long-line", "billions", "product", "cycle"],
)
def test_a_hostile_topology_conf_is_refused_at_once(text: str) -> None:
    with pytest.raises(InvalidInputError):
        read_slurm(text)


@FUZZ
@given(text=st.one_of(slurm_text(), GARBAGE))
def test_a_mutated_topology_conf_is_read_or_refused_cleanly(text: str) -> None:
    read_or_refuse(read_slurm, text)
