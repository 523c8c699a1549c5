"""Jobs on the wire: what a submission carries, and how a job reads back."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import Field, StrictFloat, StrictInt, StrictStr

from topoq.domain.durations import MAX_DURATION_S
from topoq.domain.phases import DependencyKind, DependencyStatus, JobPhase
from topoq.wire.v1.base import GpuCount, ResourceAmounts, WireModel

MAX_RETRY_LIMIT = 100


class JobFormat(StrEnum):
    TOPOQ = "topoq"
    """topoq's own job file (apiVersion topoq.io/v1, kind Job)."""
    HYPERPOD = "hyperpod"
    """The fields of `hyp create hyp-pytorch-job` (job_name, instance_type, node_count, …)."""
    KUEUE = "kueue"
    """A Kueue Workload (apiVersion kueue.x-k8s.io/v1beta1 or v1beta2, kind Workload)."""
    KUBERNETES = "kubernetes"
    """A Kubernetes manifest as applied: a batch/v1 Job, a HyperPodPyTorchJob, a Kubeflow
    PyTorchJob, or a v1 Pod (a v1 List of the Pods of one kueue.x-k8s.io/pod-group-name)."""


class DependencyModel(WireModel):
    kind: DependencyKind
    job: StrictStr = Field(description="The id of the job depended on.")


class SubmitJobRequest(WireModel):
    format: JobFormat = Field(description="How `document` is written.")
    document: dict[str, Any] = Field(description="The job document, as JSON.")
    team: StrictStr | None = Field(
        default=None,
        description="The team to charge. Default: from the namespace `hyperpod-ns-<team>` "
        "(or the queue `hyperpod-ns-<team>-localqueue`), else the namespace.",
    )
    priority_class: StrictStr | None = Field(
        default=None, description="Overrides the document's priority class."
    )
    id: StrictStr | None = Field(
        default=None,
        description="The job id, a DNS-1123 subdomain (`llama-pretrain-7`; 1 to 253 "
        "lowercase letters, digits, '-' and '.'). Default: the document's name.",
    )
    max_retry: StrictInt | None = Field(
        default=None,
        ge=0,
        le=MAX_RETRY_LIMIT,
        description="Restarts after a failure. Default: the document's `max_retry`, else 0.",
    )
    time_limit_s: StrictInt | StrictFloat | None = Field(
        default=None,
        gt=0,
        le=MAX_DURATION_S,
        description="Seconds the job may run before it is stopped (TIME_LIMIT_REACHED). "
        "Default: the document's `timeLimit`, else its priority class's, else unlimited.",
    )
    dependencies: list[DependencyModel] = Field(default_factory=list)


class TopologyRequestModel(WireModel):
    required: str | None = None
    preferred: str | None = None
    slices: list[dict[str, str | int]] = Field(
        default_factory=list, description="`{level, size}`, outermost first."
    )
    group: str | None = None
    spread: dict[str, str | int] | None = Field(
        default=None, description="`{level, maxPodsPerDomain}`."
    )


class PodSetModel(WireModel):
    name: str
    count: int
    requests: ResourceAmounts
    node_selector: dict[str, str] = Field(default_factory=dict)
    topology: TopologyRequestModel
    image: str | None = Field(
        default=None,
        description="The container image the pods run (null: the executor's default). Only "
        "an executor that runs containers (kubernetes) runs it.",
    )


class WorkloadModel(WireModel):
    name: str
    namespace: str
    queue: str | None = None
    priority_class: str | None = None
    pod_sets: list[PodSetModel]


class PhaseChangeModel(WireModel):
    at: float = Field(description="Seconds since the epoch.")
    phase: JobPhase
    cause: str


class AssignmentModel(WireModel):
    pod_set: str
    node: str | None
    domain: dict[str, str]
    count: int
    first_rank: int
    gpu_devices: list[list[int]] = Field(
        default_factory=list,
        description="Per pod in rank order, the GPU devices of the node it takes, on nodes "
        "open to GPU shares (topoq.io/gpu-sharing); empty elsewhere.",
    )


class AllocationModel(WireModel):
    nodes: list[str]
    usage: dict[str, ResourceAmounts] = Field(description="Quota used, per flavor.")
    borrowed: dict[str, ResourceAmounts] = Field(description="The part above the guarantee.")
    span: dict[str, int] = Field(description="How many domains of each level the gang uses.")
    best_span: dict[str, int] = Field(
        default_factory=dict,
        description="The fewest domains of each level the free capacity allowed the gang when "
        "it was placed (each level on its own; empty when not recorded).",
    )
    assignments: list[AssignmentModel]


class JobSummary(WireModel):
    """A row of the job list. Jobs of teams the caller does not act for show only id, team,
    phase and GPUs (``visible`` is false, the other fields are null)."""

    id: str
    team: str
    phase: JobPhase
    gpus: GpuCount = Field(
        description="GPUs the whole gang requests (shares of one GPU included: 1.5)."
    )
    visible: bool = True
    user: str | None = None
    priority_class: str | None = None
    pods: int | None = None
    held: bool | None = None
    submitted_at: float | None = None
    span: dict[str, int] | None = None
    time_limit_s: float | None = Field(
        default=None, description="The job's own time limit (null: its class's, or none)."
    )
    reason: str | None = Field(
        default=None,
        description="A pending job's reason to wait, as its latest cycle gave it (the code "
        "`explain` answers with; null before its first cycle, and for jobs not pending).",
    )
    waiting_on: list[DependencyModel] | None = Field(
        default=None,
        description="A pending job's dependencies still open (`explain` says where every "
        "dependency stands); null for a job not pending, and for other teams' jobs.",
    )
    eta_at: float | None = Field(
        default=None,
        description="When a pending job is expected to start (seconds since the epoch), "
        "where the time limits of running jobs allow computing it.",
    )
    reason_message: str | None = Field(
        default=None,
        description="A pending job's reason in words, with its numbers, as its latest cycle "
        "left it (`explain` adds the remedies; null where `reason` is).",
    )


class JobDetail(JobSummary):
    workload: WorkloadModel
    history: list[PhaseChangeModel]
    allocation: AllocationModel | None = None
    admitted_at: float | None = None
    started_at: float | None = None
    failures: int = 0
    preemptions: int = 0
    preempted_for: str | None = Field(
        default=None, description="While preempting: the job it is being evicted for."
    )
    max_retry: int = 0
    dependencies: list[DependencyModel] = Field(default_factory=list)
    warnings: list[str] = Field(
        default_factory=list,
        description="In the submit answer: what of the job, accepted as written, the server "
        "will not do (a pod set's image, under an executor that runs no containers). Empty "
        "in the other answers.",
    )


class JobList(WireModel):
    items: list[JobSummary]
    total: int = Field(description="Jobs matching the filters, on every page.")
    limit: int
    offset: int


class QueueEntry(JobSummary):
    """A waiting job in the queue: its place, what topology it asks for and, for a job the
    caller sees, what would let it start."""

    position: int | None = Field(
        description="Its turn in the next cycle, 1 first, counted over every team's waiting "
        "jobs, as the books stand (an admission moves its team back in the order). Null for "
        "a job not in line: held by a user, or waiting on another job."
    )
    topology: str | None = Field(
        default=None,
        description="Where its pods must or should go, per pod set, e.g. `required block` "
        "or `preferred rack` (`any`: no constraint); null for other teams' jobs.",
    )
    remedies: list[str] | None = Field(
        default=None,
        description="What would let it start, as its latest cycle left it (`explain`'s "
        "remedies); null for other teams' jobs.",
    )


class QueueList(WireModel):
    """The waiting jobs in scheduling order: those in line first, by position, then those not
    in line (held, or waiting on another job), oldest first."""

    items: list[QueueEntry]
    total: int = Field(description="Waiting jobs matching the filter, on every page.")
    in_line: int = Field(description="Of them, those in line (with a position).")
    limit: int
    offset: int


class ChangesModel(WireModel):
    """A mark that moves with every change a view of the cluster shows."""

    mark: str = Field(
        description="Opaque. It moves when a job is written (submitted, admitted, moved to "
        "another phase, held, released), the inventory or a node's state changes, a policy "
        "version is set, or a cycle records a decision or a changed reason to wait. A client "
        "polls it and reads its views again only when it moved."
    )


class DependencyStatusModel(WireModel):
    """One dependency of a job and where it stands now."""

    kind: DependencyKind
    job: str = Field(description="The id of the job depended on (its upstream job).")
    phase: JobPhase | None = Field(
        description="The upstream job's phase now; null when no job has this id."
    )
    status: DependencyStatus = Field(
        description="open: the upstream job has not finished; met: it ended as the kind asks; "
        "broken: it ended otherwise (or does not exist), so the job is cancelled."
    )


class FairShareStandingModel(WireModel):
    """One team's place in fair share: borrowed capacity now, decayed usage and weight."""

    team: str
    weight: int
    borrowed_share: float = Field(
        description="The largest fraction of any resource of the cluster it holds above its "
        "guarantee now."
    )
    usage: float = Field(
        description="Its decayed usage: the decayed average of its borrowed share over the "
        "recent past (scheduling.fairShare.usageHalfLifeS)."
    )
    position: float | None = Field(
        description="(borrowed_share + usage) / weight: the lowest is served first and the "
        "highest is the first fair-share victim; null is last of all (weight 0)."
    )


class Explanation(WireModel):
    job: str
    phase: JobPhase
    reason: str | None = Field(
        default=None, description="Why it waits, e.g. WAITING_FOR_QUOTA (null unless pending)."
    )
    message: str
    numbers: dict[str, int | str] = Field(default_factory=dict)
    remedies: list[str] = Field(default_factory=list)
    dependencies: list[DependencyStatusModel] = Field(
        default_factory=list, description="Each dependency of the job, in the order given."
    )
    eta_at: float | None = Field(
        default=None,
        description="When it is expected to start (seconds since the epoch), where the time "
        "limits of running jobs allow computing it.",
    )
    fair_share: list[FairShareStandingModel] = Field(
        default_factory=list,
        description="Under fair-share idle allocation, for a pending job: its team and every "
        "team that borrows or has usage, lowest position first (empty otherwise).",
    )


class JobHistory(WireModel):
    job: str
    history: list[PhaseChangeModel]


class PodLogModel(WireModel):
    """What one read returned of one pod's log. Offsets are stream offsets: bytes since the
    pod's first, which a rotation of its log does not move."""

    pod: int
    pod_set: str
    node: str
    offset: int = Field(description="Where this pod's text starts.")
    next_offset: int = Field(description="Where a forward read (`offset=`) continues.")
    size_bytes: int = Field(
        description="The pod's stream end at the read: every byte it wrote, kept or rotated away."
    )
    truncated: bool = Field(
        description="Bytes were left out: before a tail, or after a forward read's range."
    )


class JobLogs(WireModel):
    job: str
    pod: int | None
    attempt: int
    """The attempt read (from 1)."""
    latest_attempt: int = Field(
        description="The newest attempt with logs when it was read: a follower that sees it "
        "pass `attempt` reads the rest of this attempt, then the next."
    )
    text: str
    """One pod's text, or every pod's under a `==> … <==` header each."""
    truncated: bool
    """Whether any pod's text was cut to the read's limit."""
    pods: list[PodLogModel]
