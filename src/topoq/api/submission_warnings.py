"""What a submission asks that the server's executor will not do: said in the submit answer
(``JobDetail.warnings``) and the submission's audit entry rather than refused, so that one job
file is accepted by every server and runs as written under an executor that can."""

from __future__ import annotations

from topoq.domain.workload import WorkloadSpec
from topoq.engine.ports import ExecutorCapabilities
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
