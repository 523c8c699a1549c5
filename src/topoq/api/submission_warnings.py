"""What a submission asks that the server's executor will not do: said in the submit answer
(``JobDetail.warnings``) and the submission's audit entry rather than refused, so that one job
file is accepted by every server and runs as written under an executor that can — unless the
job could not run at all (a share of a GPU where the executor cannot confine a pod to one):
that is refused (``refuse_unshareable``)."""

from __future__ import annotations

from topoq.domain.errors import InvalidInputError
from topoq.domain.workload import WorkloadSpec
from topoq.engine.ports import ExecutorCapabilities
from topoq.executors.environment import refuse_gpu_shares
from topoq.executors.registry import PLUGINS

MAX_SHOWN_IMAGE_CHARS = 200
"""An image in a warning is cut to this (an image is at most 4,096 characters)."""


def unrun_images(workload: WorkloadSpec, executor: ExecutorCapabilities | None) -> list[str]:
    """One warning per pod set that names an image ``executor`` does not run (none when it
    runs containers, or when the executor is not known)."""
    if executor is None or executor.runs_containers:
        return []
    runners = sorted(name for name, found in PLUGINS.items() if found.capabilities.runs_containers)
    remedy = f"start the server with --executor {' or '.join(runners)} to run images"
    return [
        f"pod set {pod_set.name!r} names image {pod_set.image[:MAX_SHOWN_IMAGE_CHARS]!r} that "
        f"is not run: the {executor.name} executor runs each pod's command as a process on "
        f"its host, not in a container ({remedy})"
        for pod_set in workload.pod_sets
        if pod_set.image is not None
    ]


def refuse_unshareable(workload: WorkloadSpec, executor: ExecutorCapabilities | None) -> None:
    """Refuse a job a pod of which asks for a share of a GPU when ``executor`` cannot give a
    pod part of a device (it would be admitted, then fail at every start)."""
    if executor is None or executor.shares_gpus:
        return
    sharers = sorted(n for n, found in PLUGINS.items() if found.capabilities.shares_gpus)
    hint = (
        "ask for whole GPUs (nvidia.com/gpu: 1), or run shares on a server started with "
        f"--executor {' or '.join(sharers)}"
    )
    refuse_gpu_shares(workload, executor, error=InvalidInputError, hint=hint)
