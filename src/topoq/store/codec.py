"""JSON codecs for what the store keeps: job specs with their workloads, allocations with their
placements, and node specs (policies and decisions: ``policy_codec``).

``decode_x(encode_x(value)) == value`` for every value (property tests). Encoded documents are
plain JSON (objects, lists, strings, numbers, booleans, null). Mappings whose order carries
meaning (a domain's labels, highest level first) are written as lists of pairs, because not
every JSON column keeps key order. Optional fields are read with their defaults, so a document
written before a field existed still decodes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from topoq.domain.governance import FlavorName, TeamName
from topoq.domain.job import (
    Allocation,
    Dependency,
    DependencyKind,
    JobId,
    JobPhase,
    JobSpec,
    PhaseChange,
    SourceObject,
)
from topoq.domain.node import NodeName, NodeSpec, Taint, TaintEffect
from topoq.domain.placement import (
    DomainAssignment,
    PlacementReason,
    PlacementResult,
    PodSetDiagnosis,
    PodSetOutcome,
)
from topoq.domain.resources import Resources
from topoq.domain.workload import (
    NodeSelectorTerm,
    PodSetSpec,
    SelectorOperator,
    SelectorRequirement,
    SliceConstraint,
    SpreadConstraint,
    Toleration,
    TolerationOperator,
    TopologyRequest,
    WorkloadSpec,
)

Document = dict[str, Any]
"""An encoded value: a JSON object."""


# --- resources and nodes ---------------------------------------------------------------------
def encode_resources(resources: Mapping[str, int]) -> dict[str, int]:
    return dict(resources)


def decode_resources(data: Mapping[str, Any]) -> Resources:
    return Resources({str(name): int(amount) for name, amount in data.items()})


def encode_node(node: NodeSpec) -> Document:
    return {
        "name": node.name,
        "labels": dict(node.labels),
        "allocatable": encode_resources(node.allocatable),
        "taints": [
            {"key": taint.key, "effect": taint.effect.value, "value": taint.value}
            for taint in node.taints
        ],
        "unschedulable": node.unschedulable,
        "ready": node.ready,
    }


def decode_node(data: Mapping[str, Any]) -> NodeSpec:
    return NodeSpec(
        name=NodeName(data["name"]),
        labels=dict(data.get("labels", {})),
        allocatable=decode_resources(data.get("allocatable", {})),
        taints=tuple(
            Taint(item["key"], TaintEffect(item["effect"]), item.get("value", ""))
            for item in data.get("taints", ())
        ),
        unschedulable=bool(data.get("unschedulable", False)),
        ready=bool(data.get("ready", True)),
    )


# --- workloads ---------------------------------------------------------------------------
def encode_workload(workload: WorkloadSpec) -> Document:
    return {
        "name": workload.name,
        "namespace": workload.namespace,
        "queue": workload.queue,
        "priority_class": workload.priority_class,
        "time_limit_s": workload.time_limit_s,
        "pod_sets": [_encode_pod_set(pod_set) for pod_set in workload.pod_sets],
    }


def decode_workload(data: Mapping[str, Any]) -> WorkloadSpec:
    return WorkloadSpec(
        name=data["name"],
        pod_sets=tuple(_decode_pod_set(item) for item in data["pod_sets"]),
        namespace=data.get("namespace", "default"),
        queue=data.get("queue"),
        priority_class=data.get("priority_class"),
        time_limit_s=data.get("time_limit_s"),
    )


def _encode_pod_set(pod_set: PodSetSpec) -> Document:
    return {
        "name": pod_set.name,
        "count": pod_set.count,
        "requests": encode_resources(pod_set.requests),
        "node_selector": dict(pod_set.node_selector),
        "affinity_terms": [
            [_encode_requirement(requirement) for requirement in term.requirements]
            for term in pod_set.affinity_terms
        ],
        "tolerations": [_encode_toleration(toleration) for toleration in pod_set.tolerations],
        "topology": _encode_topology(pod_set.topology),
        "command": list(pod_set.command),
        "environment": dict(pod_set.environment),
        **({"image": pod_set.image} if pod_set.image is not None else {}),
    }


def _decode_pod_set(data: Mapping[str, Any]) -> PodSetSpec:
    return PodSetSpec(
        name=data["name"],
        count=int(data["count"]),
        requests=decode_resources(data.get("requests", {})),
        node_selector=dict(data.get("node_selector", {})),
        affinity_terms=tuple(
            NodeSelectorTerm(tuple(_decode_requirement(item) for item in term))
            for term in data.get("affinity_terms", ())
        ),
        tolerations=tuple(_decode_toleration(item) for item in data.get("tolerations", ())),
        topology=_decode_topology(data.get("topology", {})),
        command=tuple(str(part) for part in data.get("command", ())),
        environment={str(k): str(v) for k, v in data.get("environment", {}).items()},
        image=data.get("image"),  # jobs stored before images were kept have none
    )


def _encode_requirement(requirement: SelectorRequirement) -> Document:
    return {
        "key": requirement.key,
        "operator": requirement.operator.value,
        "values": list(requirement.values),
    }


def _decode_requirement(data: Mapping[str, Any]) -> SelectorRequirement:
    return SelectorRequirement(
        data["key"], SelectorOperator(data["operator"]), tuple(data.get("values", ()))
    )


def _encode_toleration(toleration: Toleration) -> Document:
    return {
        "key": toleration.key,
        "operator": toleration.operator.value,
        "value": toleration.value,
        "effect": toleration.effect,
    }


def _decode_toleration(data: Mapping[str, Any]) -> Toleration:
    return Toleration(
        key=data.get("key"),
        operator=TolerationOperator(data.get("operator", TolerationOperator.EQUAL.value)),
        value=data.get("value", ""),
        effect=data.get("effect"),
    )


def _encode_topology(request: TopologyRequest) -> Document:
    spread = request.spread
    return {
        "required": request.required,
        "preferred": request.preferred,
        "slices": [[layer.level, layer.size] for layer in request.slices],
        "group": request.group,
        "spread": None if spread is None else [spread.level, spread.max_pods_per_domain],
    }


def _decode_topology(data: Mapping[str, Any]) -> TopologyRequest:
    spread = data.get("spread")
    return TopologyRequest(
        required=data.get("required"),
        preferred=data.get("preferred"),
        slices=tuple(SliceConstraint(level, int(size)) for level, size in data.get("slices", ())),
        group=data.get("group"),
        spread=None if spread is None else SpreadConstraint(spread[0], int(spread[1])),
    )


# --- jobs --------------------------------------------------------------------------------
def encode_job_spec(spec: JobSpec) -> Document:
    return {
        "id": spec.id,
        "team": spec.team,
        "workload": encode_workload(spec.workload),
        "submitted_at": spec.submitted_at,
        "priority_class": spec.priority_class,
        "dependencies": [[dep.kind.value, dep.job] for dep in spec.dependencies],
        "max_retry": spec.max_retry,
        "user": spec.user,
        "runtime_s": spec.runtime_s,
        "time_limit_s": spec.time_limit_s,
        **({"source": _encode_source(spec.source)} if spec.source is not None else {}),
    }


def _encode_source(source: SourceObject) -> Document:
    return {
        "kind": source.kind,
        "namespace": source.namespace,
        "name": source.name,
        "uid": source.uid,
        **({"manifests": list(source.manifests)} if source.manifests else {}),
    }


def _decode_source(data: Mapping[str, Any] | None) -> SourceObject | None:
    if data is None:
        return None
    return SourceObject(
        data["kind"],
        data["namespace"],
        data["name"],
        data["uid"],
        tuple(data.get("manifests", ())),
    )


def decode_job_spec(data: Mapping[str, Any]) -> JobSpec:
    return JobSpec(
        id=JobId(data["id"]),
        team=TeamName(data["team"]),
        workload=decode_workload(data["workload"]),
        submitted_at=float(data["submitted_at"]),
        priority_class=data.get("priority_class"),
        dependencies=tuple(
            Dependency(DependencyKind(kind), JobId(job))
            for kind, job in data.get("dependencies", ())
        ),
        max_retry=int(data.get("max_retry", 0)),
        user=data.get("user"),
        runtime_s=data.get("runtime_s"),
        time_limit_s=data.get("time_limit_s"),
        source=_decode_source(data.get("source")),
    )


# --- placements and allocations --------------------------------------------------------------
def encode_history(history: Sequence[PhaseChange]) -> list[list[Any]]:
    """A job's phase changes: ``[at, phase, cause]`` each, in order."""
    return [[change.at_s, change.phase.value, change.cause] for change in history]


def decode_history(data: Sequence[Sequence[Any]]) -> tuple[PhaseChange, ...]:
    return tuple(PhaseChange(float(at), JobPhase(phase), str(cause)) for at, phase, cause in data)


def encode_allocation(allocation: Allocation) -> Document:
    return {
        "placement": encode_placement(allocation.placement),
        "resources_on_node": {
            node: encode_resources(amounts)
            for node, amounts in allocation.resources_on_node.items()
        },
        "usage": _encode_per_flavor(allocation.usage),
        "borrowed": _encode_per_flavor(allocation.borrowed),
    }


def decode_allocation(data: Mapping[str, Any]) -> Allocation:
    return Allocation(
        placement=decode_placement(data["placement"]),
        resources_on_node={
            str(node): decode_resources(amounts)
            for node, amounts in data.get("resources_on_node", {}).items()
        },
        usage=_decode_per_flavor(data.get("usage", {})),
        borrowed=_decode_per_flavor(data.get("borrowed", {})),
    )


def _encode_per_flavor(amounts: Mapping[FlavorName, Resources]) -> Document:
    return {flavor: encode_resources(resources) for flavor, resources in amounts.items()}


def _decode_per_flavor(data: Mapping[str, Any]) -> dict[FlavorName, Resources]:
    return {FlavorName(flavor): decode_resources(amounts) for flavor, amounts in data.items()}


def encode_placement(placement: PlacementResult) -> Document:
    return {
        "workload": placement.workload,
        "pod_sets": [_encode_outcome(outcome) for outcome in placement.pod_sets],
    }


def decode_placement(data: Mapping[str, Any]) -> PlacementResult:
    return PlacementResult(
        workload=data["workload"],
        pod_sets=tuple(_decode_outcome(item) for item in data.get("pod_sets", ())),
    )


def _encode_outcome(outcome: PodSetOutcome) -> Document:
    diagnosis = outcome.diagnosis
    return {
        "name": outcome.name,
        "count": outcome.count,
        "assignments": [
            {
                "node": assignment.node,
                "domain": [list(pair) for pair in assignment.domain.items()],
                "count": assignment.count,
                "first_rank": assignment.first_rank,
                **_encode_gpu_devices(assignment.gpu_devices),
            }
            for assignment in outcome.assignments
        ],
        "diagnosis": None if diagnosis is None else _encode_diagnosis(diagnosis),
        "span": [list(pair) for pair in outcome.span.items()],
        "best_span": [list(pair) for pair in outcome.best_span.items()],
    }


def _encode_gpu_devices(devices: tuple[tuple[int, ...], ...]) -> Document:
    """The devices of each pod, only where they were kept (older documents have none)."""
    return {"gpu_devices": [list(pod) for pod in devices]} if devices else {}


def _decode_outcome(data: Mapping[str, Any]) -> PodSetOutcome:
    diagnosis = data.get("diagnosis")
    return PodSetOutcome(
        name=data["name"],
        count=int(data["count"]),
        assignments=tuple(
            DomainAssignment(
                node=item.get("node"),
                domain={str(label): str(value) for label, value in item.get("domain", ())},
                count=int(item["count"]),
                first_rank=int(item["first_rank"]),
                gpu_devices=tuple(
                    tuple(int(device) for device in pod) for pod in item.get("gpu_devices", ())
                ),
            )
            for item in data.get("assignments", ())
        ),
        diagnosis=None if diagnosis is None else _decode_diagnosis(diagnosis),
        span={str(level): int(count) for level, count in data.get("span", ())},
        best_span={str(level): int(count) for level, count in data.get("best_span", ())},
    )


def _encode_diagnosis(diagnosis: PodSetDiagnosis) -> Document:
    return {
        "reason": diagnosis.reason.value,
        "message": diagnosis.message,
        "numbers": dict(diagnosis.numbers),
        "excluded_nodes": dict(diagnosis.excluded_nodes),
        "relaxations": list(diagnosis.relaxations),
    }


def _decode_diagnosis(data: Mapping[str, Any]) -> PodSetDiagnosis:
    return PodSetDiagnosis(
        reason=PlacementReason(data["reason"]),
        message=data.get("message", ""),
        numbers=dict(data.get("numbers", {})),
        excluded_nodes={str(cause): int(n) for cause, n in data.get("excluded_nodes", {}).items()},
        relaxations=tuple(data.get("relaxations", ())),
    )
