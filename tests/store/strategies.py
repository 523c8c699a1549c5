"""Hypothesis strategies for what the store keeps, built on ``topoq.testing``'s builders."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import strategies as st

from topoq.domain.decisions import Diagnostic, PendingReason, Preempt, PreemptionCause
from topoq.domain.governance import (
    MAX_USAGE_HALF_LIFE_S,
    ClusterPolicy,
    CohortQuota,
    CohortSpec,
    FlavorName,
    FlavorQuota,
    IdleAllocation,
    Prioritization,
    PriorityClass,
    QueueingStrategy,
    QueueOrder,
    SharingStrategy,
    TeamName,
    TeamSpec,
)
from topoq.domain.job import Allocation, Dependency, DependencyKind, JobId, JobSpec, SourceObject
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
    Toleration,
    TolerationOperator,
    WorkloadSpec,
)
from topoq.testing.builders import node_resources, pod_set, workload
from topoq.testing.governance import team

names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-./", min_size=1, max_size=12)
texts = st.text(max_size=20)
images = st.from_regex(r"[a-z0-9][a-z0-9./:@_-]{0,60}", fullmatch=True)
"""Container image references (``registry:5000/team/trainer:1``)."""
times = st.floats(min_value=0, max_value=4e9, allow_nan=False, allow_infinity=False)
resource_names = st.sampled_from(["cpu", "memory", "nvidia.com/gpu", "pods", "example.com/x"])
resources = st.dictionaries(resource_names, st.integers(-(2**62), 2**62)).map(Resources)
labels = st.dictionaries(names, texts, max_size=4)
numbers = st.dictionaries(names, st.integers(-(10**12), 10**12) | texts, max_size=3)

requirements = st.builds(
    SelectorRequirement,
    key=names,
    operator=st.sampled_from(SelectorOperator),
    values=st.lists(texts, max_size=3).map(tuple),
)
tolerations = st.builds(
    Toleration,
    key=st.none() | names,
    operator=st.sampled_from(TolerationOperator),
    value=texts,
    effect=st.none() | st.sampled_from([effect.value for effect in TaintEffect]),
)


@st.composite
def pod_sets(draw: st.DrawFn, name: str | None = None) -> PodSetSpec:
    """A pod set made by ``topoq.testing.builders.pod_set``, with slices that divide it."""
    slice_size = draw(st.sampled_from([1, 2, 4]))
    count = slice_size * draw(st.integers(1, 8))
    level = draw(names)
    built = pod_set(
        name or draw(names),
        count,
        {"nvidia.com/gpu": draw(st.integers(0, 8)), "cpu": f"{draw(st.integers(0, 9999))}m"},
        node_selector=draw(labels),
        affinity=draw(st.lists(st.lists(requirements, max_size=3).map(_term), max_size=2)),
        tolerations=draw(st.lists(tolerations, max_size=3)),
        required=draw(st.none() | st.just(level)),
        preferred=draw(st.none() | names),
        slices=draw(st.sampled_from([(), ((level, slice_size),)])),
        group=draw(st.none() | names),
        spread=draw(st.none() | st.tuples(names, st.integers(1, 4))),
    )
    return replace(built, image=draw(st.none() | images))


def _term(requirement_list: list[SelectorRequirement]) -> NodeSelectorTerm:
    return NodeSelectorTerm(tuple(requirement_list))


limits = st.none() | st.floats(0.5, 1e6, allow_nan=False)
"""Time limits: none, or a positive number of seconds."""


@st.composite
def workloads(draw: st.DrawFn) -> WorkloadSpec:
    count = draw(st.integers(1, 3))
    built = workload(*(draw(pod_sets(f"set{i}")) for i in range(count)), name=draw(names))
    return WorkloadSpec(
        built.name,
        built.pod_sets,
        namespace=draw(names),
        queue=draw(st.none() | names),
        priority_class=draw(st.none() | names),
        time_limit_s=draw(limits),
    )


job_specs = st.builds(
    JobSpec,
    id=names.map(JobId),
    team=names.map(TeamName),
    workload=workloads(),
    submitted_at=times,
    priority_class=st.none() | names,
    dependencies=st.lists(
        st.builds(Dependency, st.sampled_from(DependencyKind), names.map(JobId)), max_size=3
    ).map(tuple),
    max_retry=st.integers(0, 5),
    user=st.none() | names,
    runtime_s=st.none() | times,
    time_limit_s=limits,
    source=st.none()
    | st.builds(SourceObject, st.just("Job"), names, names, names)
    | st.builds(
        SourceObject,
        st.just("PodGroup"),
        names,
        names,
        names,
        st.lists(st.text(max_size=40), max_size=3).map(tuple),
    ),
)

assignments = st.builds(
    DomainAssignment,
    node=st.none() | names,
    domain=labels,
    count=st.integers(1, 64),
    first_rank=st.integers(0, 1000),
)
diagnoses = st.builds(
    PodSetDiagnosis,
    reason=st.sampled_from(PlacementReason),
    message=texts,
    numbers=numbers,
    excluded_nodes=st.dictionaries(names, st.integers(0, 1000), max_size=3),
    relaxations=st.lists(texts, max_size=3).map(tuple),
)
outcomes = st.builds(
    PodSetOutcome,
    name=names,
    count=st.integers(1, 64),
    assignments=st.lists(assignments, max_size=3).map(tuple),
    diagnosis=st.none() | diagnoses,
    span=st.dictionaries(names, st.integers(1, 16), max_size=3),
)
placements = st.builds(
    PlacementResult, workload=names, pod_sets=st.lists(outcomes, max_size=3).map(tuple)
)
per_flavor = st.dictionaries(names.map(FlavorName), resources, max_size=2)
allocations = st.builds(
    Allocation,
    placement=placements,
    resources_on_node=st.dictionaries(names, resources, max_size=4),
    usage=per_flavor,
    borrowed=per_flavor,
)


@st.composite
def node_specs(draw: st.DrawFn) -> NodeSpec:
    allocatable = draw(
        st.sampled_from([node_resources(), node_resources(gpus=0, pods=16)]) | resources
    )
    return NodeSpec(
        NodeName(draw(names)),
        draw(labels),
        allocatable,
        tuple(draw(st.lists(st.builds(Taint, names, st.sampled_from(TaintEffect), texts)))),
        unschedulable=draw(st.booleans()),
        ready=draw(st.booleans()),
    )


quotas = st.builds(
    FlavorQuota,
    flavor=names.map(FlavorName),
    guarantee=resources,
    borrow_limit=resources,
    lending_limit=st.none() | resources,
    covers=st.frozensets(resource_names, max_size=3),
)


@st.composite
def team_specs(draw: st.DrawFn, name: str) -> TeamSpec:
    """Half from ``topoq.testing.governance.team``, half with arbitrary quotas."""
    if draw(st.booleans()):
        return team(name, draw(st.integers(0, 64)), sharing=draw(st.sampled_from(SharingStrategy)))
    flavors = draw(st.lists(quotas, max_size=3, unique_by=lambda quota: quota.flavor))
    return TeamSpec(
        TeamName(name),
        tuple(flavors),
        draw(st.sampled_from(SharingStrategy)),
        draw(st.integers(0, 100)),
        cohort=tuple(draw(st.lists(names, max_size=2))),
        queueing=draw(st.sampled_from(QueueingStrategy)),
        active=draw(st.booleans()),
    )


@st.composite
def cohort_specs(draw: st.DrawFn, teams: tuple[TeamSpec, ...]) -> tuple[CohortSpec, ...]:
    """Specs for some of the cohorts the teams' paths name: those whose name means one place."""
    places: dict[str, set[tuple[str, ...]]] = {}
    for spec in teams:
        for depth in range(1, len(spec.cohort) + 1):
            places.setdefault(spec.cohort[depth - 1], set()).add(spec.cohort[:depth])
    paths = sorted(next(iter(p)) for name, p in places.items() if len(p) == 1 and name)
    chosen = draw(st.lists(st.sampled_from(paths), unique=True)) if paths else []
    cohort_quotas = st.builds(
        CohortQuota,
        flavor=names.map(FlavorName),
        guarantee=resources,
        borrow_limit=resources,
        lending_limit=resources,
        borrow_limited=st.frozensets(resource_names, max_size=2),
        lend_limited=st.frozensets(resource_names, max_size=2),
        covers=st.frozensets(resource_names, max_size=2),
    )
    return tuple(
        CohortSpec(
            path[-1],
            path[:-1],
            tuple(draw(st.lists(cohort_quotas, max_size=2, unique_by=lambda q: q.flavor))),
            draw(st.integers(0, 100)),
        )
        for path in chosen
        if path[-1] not in path[:-1]
    )


@st.composite
def policies(draw: st.DrawFn) -> ClusterPolicy:
    team_names = draw(st.lists(names, max_size=4, unique=True))
    class_names = draw(st.lists(names, max_size=4, unique=True))
    classes = tuple(
        PriorityClass(name, draw(st.integers(0, 100)), draw(limits)) for name in class_names
    )
    teams = tuple(draw(team_specs(name)) for name in team_names)
    return ClusterPolicy(
        teams=teams,
        cohorts=draw(cohort_specs(teams)),
        prioritization=draw(st.sampled_from(Prioritization)),
        queue_order=draw(st.sampled_from(QueueOrder)),
        priority_classes=classes,
        default_priority_class=draw(st.none() | st.sampled_from(class_names))
        if class_names
        else None,
        idle_allocation=draw(st.sampled_from(IdleAllocation)),
        idle_resource_sharing=draw(st.booleans()),
        preemption_grace_s=draw(st.integers(0, 3600)),
        starvation_guard_s=draw(st.sampled_from([0.0, 1.5, 600.0, 86400.0])),
        fair_share_usage_half_life_s=draw(
            st.sampled_from([0.0, 86400.0]) | st.floats(0, MAX_USAGE_HALF_LIFE_S)
        ),
    )


diagnostics = st.builds(
    Diagnostic,
    job=names.map(JobId),
    reason=st.sampled_from(PendingReason),
    message=texts,
    numbers=numbers,
    remedies=st.lists(texts, max_size=3).map(tuple),
)
preemptions = st.builds(
    Preempt, names.map(JobId), names.map(JobId), st.sampled_from(PreemptionCause), texts
)
