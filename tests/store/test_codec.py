"""Every codec round-trips through JSON text to an equal object."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from hypothesis import given, settings
from hypothesis import strategies as st

from tests.store import strategies
from topoq.domain.governance import ClusterPolicy
from topoq.domain.job import Allocation, JobSpec
from topoq.domain.node import NodeSpec
from topoq.store import codec, policy_codec
from topoq.testing.governance import gpu_cluster, job, policy, team

T = TypeVar("T")


def through_json(value: T, encode: Callable[[T], Any], decode: Callable[[Any], T]) -> T:
    """What a value becomes after being written as JSON text and read back."""
    return decode(json.loads(json.dumps(encode(value))))


@settings(max_examples=150)
@given(strategies.job_specs)
def test_job_spec_round_trips(spec: JobSpec) -> None:
    assert through_json(spec, codec.encode_job_spec, codec.decode_job_spec) == spec


@settings(max_examples=150)
@given(strategies.allocations)
def test_allocation_round_trips_with_its_placement(allocation: Allocation) -> None:
    decoded = through_json(allocation, codec.encode_allocation, codec.decode_allocation)
    assert decoded == allocation
    for before, after in zip(
        allocation.placement.pod_sets, decoded.placement.pod_sets, strict=True
    ):
        for kept, read in zip(before.assignments, after.assignments, strict=True):
            assert list(read.domain) == list(kept.domain), "domain labels keep their level order"


@settings(max_examples=150)
@given(strategies.policies())
def test_policy_round_trips_including_zero_guarantees(value: ClusterPolicy) -> None:
    decoded = through_json(value, policy_codec.encode_policy, policy_codec.decode_policy)
    assert decoded == value
    for mine, theirs in zip(value.teams, decoded.teams, strict=True):
        assert [q.covers for q in mine.quotas] == [q.covers for q in theirs.quotas]


@settings(max_examples=100)
@given(strategies.node_specs())
def test_node_round_trips(node: NodeSpec) -> None:
    assert through_json(node, codec.encode_node, codec.decode_node) == node


@given(strategies.diagnostics, strategies.preemptions)
def test_decisions_round_trip(diagnostic: Any, preempt: Any) -> None:
    encode_d, decode_d = policy_codec.encode_diagnostic, policy_codec.decode_diagnostic
    assert through_json(diagnostic, encode_d, decode_d) == diagnostic
    encode_p, decode_p = policy_codec.encode_preempt, policy_codec.decode_preempt
    assert through_json(preempt, encode_p, decode_p) == preempt


def test_a_zero_guarantee_still_covers_its_resource() -> None:
    zero_gpus = policy(team("research", 0, borrow_gpus=0))
    decoded = through_json(zero_gpus, policy_codec.encode_policy, policy_codec.decode_policy)
    assert decoded.teams[0].quotas[0].covers == frozenset({"nvidia.com/gpu"})


def test_builders_cluster_and_job_round_trip() -> None:
    nodes, _ = gpu_cluster([2, 2, 2])
    assert [through_json(n, codec.encode_node, codec.decode_node) for n in nodes] == nodes
    spec = job("train", "llm", pods=4, required="block", slices=[("block", 2)]).spec
    assert through_json(spec, codec.encode_job_spec, codec.decode_job_spec) == spec


@given(st.data())
def test_documents_written_before_optional_fields_existed_still_decode(data: st.DataObject) -> None:
    spec = data.draw(strategies.job_specs)
    document = codec.encode_job_spec(spec)
    for optional in ("priority_class", "dependencies", "max_retry", "user", "runtime_s"):
        document.pop(optional)
    decoded = codec.decode_job_spec(document)
    assert (decoded.id, decoded.workload) == (spec.id, spec.workload)
    assert decoded.dependencies == () and decoded.max_retry == 0


@given(strategies.job_specs)
def test_a_job_stored_before_pod_sets_had_images_loads_with_none(spec: JobSpec) -> None:
    document = codec.encode_job_spec(spec)
    for pod_set in document["workload"]["pod_sets"]:
        pod_set.pop("image", None)
    decoded = codec.decode_job_spec(json.loads(json.dumps(document)))
    assert [p.image for p in decoded.workload.pod_sets] == [None] * len(spec.workload.pod_sets)
    assert [p.name for p in decoded.workload.pod_sets] == [p.name for p in spec.workload.pod_sets]


def test_a_pod_sets_image_is_stored_only_when_it_names_one() -> None:
    spec = job("train", "llm", pods=2).spec
    named = replace(spec.workload.pod_sets[0], image="pytorch/pytorch:2.3")
    with_image = replace(spec, workload=replace(spec.workload, pod_sets=(named,)))
    assert "image" not in codec.encode_job_spec(spec)["workload"]["pod_sets"][0]
    stored = through_json(with_image, codec.encode_job_spec, codec.decode_job_spec)
    assert stored.workload.pod_sets[0].image == "pytorch/pytorch:2.3"
