"""Domain objects as v1 wire models (jobs and audit entries). Figures that need the
scheduling core (occupancy, quota books, explanations) are computed by the API."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from topoq.domain.governance import FlavorName
from topoq.domain.gpu_share import GPU_SHARE, gpus_text
from topoq.domain.job import Allocation, JobSpec, JobView, PhaseChange
from topoq.domain.placement import placement_best_span, placement_span
from topoq.domain.quantity import NVIDIA_GPU, PODS
from topoq.domain.resources import Resources
from topoq.domain.workload import PodSetSpec, TopologyRequest, WorkloadSpec
from topoq.wire.v1.base import ResourceAmounts
from topoq.wire.v1.jobs import (
    AllocationModel,
    AssignmentModel,
    DependencyModel,
    JobDetail,
    JobSummary,
    PhaseChangeModel,
    PodSetModel,
    TopologyRequestModel,
    WorkloadModel,
)


def requested_gpus(spec: JobSpec) -> int | float:
    """Whole GPUs, plus shares of one (three pods of 0.5 GPU: 1.5)."""
    return spec.workload.gpus


def topology_asked(spec: JobSpec) -> str:
    """Where the job's pods must or should go, in a few words: ``required block``,
    ``preferred rack``, ``any``; per pod set (``name: …``, joined by ``; ``) when they differ."""
    sets = [(pod_set.name, _topology_words(pod_set.topology)) for pod_set in spec.workload.pod_sets]
    if len({words for _, words in sets}) <= 1:
        return sets[0][1] if sets else "any"
    return "; ".join(f"{name}: {words}" for name, words in sets)


def _topology_words(request: TopologyRequest) -> str:
    words = [f"required {request.required}"] if request.required else []
    if request.preferred:
        words.append(f"preferred {request.preferred}")
    return ", ".join(words) or "any"


def amounts(resources: Resources) -> ResourceAmounts:
    """Readable quantities, pod slots left out, and GPUs as users write them: a share of one
    GPU (kept as ``topoq.io/gpu-milli``) is counted into ``nvidia.com/gpu`` (``"0.5"``,
    ``"2.5"``)."""
    shown = {name: text for name, text in resources.formatted().items() if name != PODS}
    share = resources.amount(GPU_SHARE)
    if share:
        del shown[GPU_SHARE]
        shown[NVIDIA_GPU] = gpus_text(resources.amount(NVIDIA_GPU), share)
    return dict(sorted(shown.items()))


def job_summary(view: JobView, *, visible: bool = True) -> JobSummary:
    """One row of the job list; with ``visible`` false only id, team, phase and GPUs."""
    base = JobSummary(
        id=view.id,
        team=view.team,
        phase=view.phase,
        gpus=requested_gpus(view.spec),
        visible=visible,
    )
    if not visible:
        return base
    spec = view.spec
    return base.model_copy(
        update={
            "user": spec.user,
            "priority_class": spec.priority_class,
            "pods": spec.workload.total_pods,
            "held": view.held,
            "submitted_at": spec.submitted_at,
            "span": allocation_span(view.allocation) if view.allocation else None,
            "time_limit_s": spec.time_limit_s,
        }
    )


def job_detail(view: JobView) -> JobDetail:
    spec = view.spec
    summary = job_summary(view)
    return JobDetail(
        **dict(summary),
        workload=workload_model(spec.workload),
        history=history_models(view.history),
        allocation=allocation_model(view.allocation) if view.allocation else None,
        admitted_at=view.admitted_at,
        started_at=view.started_at,
        failures=view.failures,
        preemptions=view.preemptions,
        preempted_for=view.preempted_for,
        max_retry=spec.max_retry,
        dependencies=[DependencyModel(kind=d.kind, job=d.job) for d in spec.dependencies],
    )


def history_models(history: Iterable[PhaseChange]) -> list[PhaseChangeModel]:
    return [PhaseChangeModel(at=c.at_s, phase=c.phase, cause=c.cause) for c in history]


def workload_model(workload: WorkloadSpec) -> WorkloadModel:
    return WorkloadModel(
        name=workload.name,
        namespace=workload.namespace,
        queue=workload.queue,
        priority_class=workload.priority_class,
        pod_sets=[_pod_set_model(pod_set) for pod_set in workload.pod_sets],
    )


def _pod_set_model(pod_set: PodSetSpec) -> PodSetModel:
    return PodSetModel(
        name=pod_set.name,
        count=pod_set.count,
        requests=amounts(pod_set.requests),
        node_selector=dict(pod_set.node_selector),
        topology=_topology_model(pod_set.topology),
        image=pod_set.image,
    )


def _topology_model(request: TopologyRequest) -> TopologyRequestModel:
    spread = request.spread
    return TopologyRequestModel(
        required=request.required,
        preferred=request.preferred,
        slices=[{"level": s.level, "size": s.size} for s in request.slices],
        group=request.group,
        spread=(
            {"level": spread.level, "maxPodsPerDomain": spread.max_pods_per_domain}
            if spread is not None
            else None
        ),
    )


def allocation_model(allocation: Allocation) -> AllocationModel:
    return AllocationModel(
        nodes=sorted(allocation.nodes),
        usage=_by_flavor(allocation.usage),
        borrowed=_by_flavor(allocation.borrowed),
        span=allocation_span(allocation),
        best_span=placement_best_span(allocation.placement),
        assignments=[
            AssignmentModel(
                pod_set=outcome.name,
                node=assignment.node,
                domain=dict(assignment.domain),
                count=assignment.count,
                first_rank=assignment.first_rank,
                gpu_devices=[list(pod) for pod in assignment.gpu_devices],
            )
            for outcome in allocation.placement.pod_sets
            for assignment in outcome.assignments
        ],
    )


def allocation_span(allocation: Allocation) -> dict[str, int]:
    """How many distinct domains of each level the whole gang uses."""
    return placement_span(allocation.placement)


def _by_flavor(usage: Mapping[FlavorName, Resources]) -> dict[str, ResourceAmounts]:
    return {str(flavor): amounts(resources) for flavor, resources in sorted(usage.items())}
