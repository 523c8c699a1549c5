"""Pods' output: ``<work_dir>/<team>/<job>/<attempt>/pod-<rank>.log`` (stdout and stderr
together; paths in ``topoq.executors.layout``), with ``pods.json`` beside the logs naming each
rank's pod set and node. Reading needs only the directory, so logs survive the executor that
wrote them."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId
from topoq.engine.ports import UnknownJob
from topoq.executors.environment import PodPlan
from topoq.executors.layout import job_dir, pod_log, write_private_text

MANIFEST = "pods.json"


def write_manifest(directory: Path, plans: Sequence[PodPlan]) -> None:
    entries = [{"rank": p.rank, "pod_set": p.pod_set, "node": p.node} for p in plans]
    write_private_text(directory / MANIFEST, json.dumps(entries, indent=1) + "\n")


def latest_attempt_dir(work_dir: Path, team: str, job: JobId) -> Path:
    """The directory of the job's newest attempt. Raises UnknownJob when it never ran here."""
    directory = job_dir(work_dir, team, job)
    entries = directory.iterdir() if directory.is_dir() else iter(())
    attempts = [entry for entry in entries if entry.is_dir() and entry.name.isdigit()]
    if not attempts:
        raise UnknownJob(f"job {job} has no logs: it never started on this executor")
    return max(attempts, key=lambda entry: int(entry.name))


def read_logs(work_dir: Path, team: str, job: JobId, pod: int | None = None) -> str:
    """One pod's output, or every pod's under a ``==> … <==`` header, in rank order."""
    directory = latest_attempt_dir(work_dir, team, job)
    pods = _manifest(directory)
    if pod is not None:
        if pod not in pods:
            raise InvalidInputError(
                f"job {job} has no pod {pod}",
                hint=f"its pods are 0..{len(pods) - 1}" if pods else "it has no pods",
            )
        return _text(pod_log(directory, pod))
    parts = []
    for rank, (pod_set, node) in sorted(pods.items()):
        header = f"==> job {job} attempt {directory.name} pod {rank} ({pod_set} on {node}) <=="
        parts.append(f"{header}\n{_text(pod_log(directory, rank))}")
    return "\n".join(parts)


def _manifest(directory: Path) -> dict[int, tuple[str, str]]:
    path = directory / MANIFEST
    if not path.exists():
        return {}
    entries = json.loads(path.read_text())
    return {int(e["rank"]): (str(e["pod_set"]), str(e["node"])) for e in entries}


def _text(path: Path) -> str:
    if not path.exists():
        return ""
    return path.read_bytes().decode("utf-8", errors="replace")
