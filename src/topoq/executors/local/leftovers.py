"""Pods a crashed control plane left running: adopted by the next executor on the same work
directory when the store says their attempt still holds its nodes, else found and stopped, so a
requeued gang never runs twice.

Each running attempt records its pods in ``pids.json`` beside its logs — the job, its team,
and per pod its plan, GPU indices and keeper's process id (``RecordedPod``), all a successor
needs to take the attempt over; and every pod process carries the executor's marker in its
environment (``TOPOQ_POD``), which is how processes that left the pod's session, or were
spawned just before a crash and never recorded, are found wherever their working directory
is."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Collection, Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

from topoq.executors.environment import PodPlan
from topoq.executors.local.layout import EXECUTOR_ID_FILE, write_private_text
from topoq.executors.local.process_table import kill_until_gone, marker_of

LEFTOVERS = "pids.json"
"""Beside each running attempt's logs: the process ids of its pods."""


@dataclass(frozen=True)
class RecordedPod:
    plan: PodPlan
    gpu_indices: tuple[int, ...]
    pid: int


@dataclass(frozen=True)
class RecordedAttempt:
    """What ``pids.json`` says of a running attempt (its number is its directory's name)."""

    directory: Path
    job: str
    team: str
    number: int
    pods: tuple[RecordedPod, ...]


def record_pids(
    directory: Path,
    job: str,
    pids: Sequence[int],
    *,
    team: str = "",
    pods: Sequence[RecordedPod] = (),
) -> None:
    """Keep the attempt's pod pids (and, to be adopted after a restart, its team and pods)."""
    document = {
        "job": job,
        "team": team,
        "pids": list(pids),
        "pods": [
            {**asdict(pod.plan), "gpu_indices": list(pod.gpu_indices), "pid": pod.pid}
            for pod in pods
        ],
    }
    write_private_text(directory / LEFTOVERS, json.dumps(document) + "\n")


def recorded_attempts(work_dir: Path) -> Iterator[RecordedAttempt]:
    """The attempts whose records name everything adoption needs (others are skipped)."""
    for record in sorted(work_dir.glob(f"*/*/*/{LEFTOVERS}")):
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError, KeyError):
            document = json.loads(record.read_text(encoding="utf-8"))
            pods = tuple(
                RecordedPod(
                    PodPlan(
                        rank=int(pod["rank"]),
                        pod_set=str(pod["pod_set"]),
                        node=str(pod["node"]),
                        local_rank=int(pod["local_rank"]),
                        local_world_size=int(pod["local_world_size"]),
                        node_rank=int(pod["node_rank"]),
                        gpus=int(pod["gpus"]),
                        gpu_devices=(
                            None
                            if pod.get("gpu_devices") is None
                            else tuple(int(index) for index in pod["gpu_devices"])
                        ),
                        gpu_milli=int(pod.get("gpu_milli", 0)),
                    ),
                    tuple(int(index) for index in pod["gpu_indices"]),
                    int(pod["pid"]),
                )
                for pod in document["pods"]
            )
            if pods and document.get("team") and record.parent.name.isdigit():
                yield RecordedAttempt(
                    record.parent,
                    str(document["job"]),
                    str(document["team"]),
                    int(record.parent.name),
                    pods,
                )


def forget_pids(directory: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        (directory / LEFTOVERS).unlink()


def stop_leftovers(
    work_dir: Path, executor_marker: str | None = None, *, sparing: Collection[Path] = ()
) -> list[int]:
    """SIGKILL every process a previous executor of ``work_dir`` left: the recorded pods whose
    environment still carries ``executor_marker`` (so a reused pid is left alone), their
    process groups, sessions and descendants, and every other process carrying the marker —
    but those of the attempts whose directories are in ``sparing`` (adopted). Forgets the
    other records. Returns the pids killed. Without ``executor_marker``, the id kept in
    ``work_dir`` is used (none: nothing ran there)."""
    if executor_marker is None:
        try:
            executor_marker = (work_dir / EXECUTOR_ID_FILE).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError):
            return []
        if not executor_marker:
            return []
        executor_marker += "/"
    leaders = []
    spared = set(sparing)
    for record in sorted(work_dir.glob(f"*/*/*/{LEFTOVERS}")):
        if record.parent in spared:
            continue
        with contextlib.suppress(OSError, ValueError, TypeError, AttributeError):
            pids = [int(pid) for pid in json.loads(record.read_text()).get("pids", [])]
            leaders += [pid for pid in pids if _carries(pid, executor_marker)]
        record.unlink(missing_ok=True)
    if not spared:
        return sorted(kill_until_gone(executor_marker, leaders))
    kept = {_marker_of_attempt(executor_marker, directory, work_dir) for directory in spared}
    return sorted(kill_until_gone(executor_marker, leaders, sparing=kept))


def _marker_of_attempt(executor_marker: str, directory: Path, work_dir: Path) -> str:
    """What every marker of the attempt in ``directory`` starts with (``layout.attempt_marker``
    of its escaped team, job and number: the directory's own path below ``work_dir``)."""
    return executor_marker + "/".join(directory.relative_to(work_dir).parts) + "/"


def _carries(pid: int, executor_marker: str) -> bool:
    marker = marker_of(pid)
    return marker is not None and marker.startswith(executor_marker)
