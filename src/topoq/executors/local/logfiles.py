"""Pods' output: ``<work_dir>/<team>/<job>/<attempt>/pod-<rank>.log`` (stdout and stderr
together; paths in ``topoq.executors.local.layout``), with ``pods.json`` beside the logs naming each
rank's pod set and node. Reading needs only the directory, so logs survive the executor that
wrote them.

Both ends are bounded. A log past half the executor's limit is rotated (copy-truncate): its
newest half-limit bytes replace ``pod-<rank>.log.1`` and the log is emptied, the pod writing on
at its start (it writes with ``O_APPEND``). A read returns at most its limit: the tail (reaching
into ``.1`` when the log is shorter), or a range from an offset; it seeks, so a read never
loads more of a file than it returns."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import BinaryIO

from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId
from topoq.engine.ports import JobLog, LogRequest, PodLog, UnknownJob
from topoq.executors.environment import PodPlan
from topoq.executors.local.layout import (
    job_dir,
    open_private,
    pod_log,
    rotated_log,
    write_private_text,
)

MANIFEST = "pods.json"
_COPY_CHUNK_BYTES = 1 << 20


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


def read_logs(work_dir: Path, request: LogRequest) -> JobLog:
    """What ``request`` asks for of the newest attempt's logs (see ``LogRequest``)."""
    directory = latest_attempt_dir(work_dir, request.team, request.job)
    pods = _manifest(directory)
    if request.pod is not None and request.pod not in pods:
        raise InvalidInputError(
            f"job {request.job} has no pod {request.pod}",
            where="pod",
            hint=f"its pods are 0..{len(pods) - 1}" if pods else "it has no pods",
        )
    if request.offset is not None and request.pod is None:
        raise InvalidInputError(
            "a read from an offset is of one pod's log", where="offset", hint="give the pod"
        )
    ranks = [request.pod] if request.pod is not None else sorted(pods)
    share = max(1, request.limit_bytes // max(1, len(ranks)))
    read = tuple(_read_pod(directory, rank, pods[rank], request.offset, share) for rank in ranks)
    return JobLog(request.job, int(directory.name), request.pod, read)


def _read_pod(
    directory: Path, rank: int, where: tuple[str, str], offset: int | None, limit: int
) -> PodLog:
    with _opened(pod_log(directory, rank)) as current:
        size = os.fstat(current.fileno()).st_size if current is not None else 0
        if offset is not None:
            start = offset if offset <= size else 0  # past the end: rotated since
            data = _read_range(current, start, min(limit, size - start))
            return PodLog(rank, *where, _decode(data), start, start + len(data), size,
                          truncated=start + len(data) < size)  # fmt: skip
        from_current = min(limit, size)
        data = _read_range(current, size - from_current, from_current)
    older, older_left_out = b"", 0
    if from_current < limit:
        older, older_left_out = _tail_of(rotated_log(directory, rank), limit - from_current)
    truncated = size > from_current or older_left_out > 0
    start = size - from_current
    return PodLog(rank, *where, _decode(older + data), start, size, size, truncated)


def _tail_of(path: Path, limit: int) -> tuple[bytes, int]:
    """The last ``limit`` bytes of ``path`` and how many bytes before them it holds."""
    with _opened(path) as file:
        size = os.fstat(file.fileno()).st_size if file is not None else 0
        taken = min(limit, size)
        return _read_range(file, size - taken, taken), size - taken


@contextlib.contextmanager
def _opened(path: Path) -> Iterator[BinaryIO | None]:
    try:
        file = path.open("rb")
    except FileNotFoundError:
        yield None
        return
    with file:
        yield file


def _read_range(file: BinaryIO | None, start: int, length: int) -> bytes:
    if file is None or length <= 0:
        return b""
    file.seek(start)
    return file.read(length)


def _decode(data: bytes) -> str:
    return data.decode("utf-8", errors="replace")


def _manifest(directory: Path) -> dict[int, tuple[str, str]]:
    """Rank → (pod set, node); empty when the attempt has no readable manifest (it failed
    before writing one)."""
    try:
        entries = json.loads((directory / MANIFEST).read_text(encoding="utf-8"))
        return {int(e["rank"]): (str(e["pod_set"]), str(e["node"])) for e in entries}
    except (OSError, ValueError, TypeError, KeyError):
        return {}


def rotate_if_over(directory: Path, rank: int, limit_bytes: int) -> bool:
    """Rotate the pod's log when it holds more than half of ``limit_bytes``: its newest
    half-limit bytes replace ``pod-<rank>.log.1``, then the log is emptied. So the two files
    hold at most the limit, plus what the pod writes between two checks; what it writes during
    the copy itself (milliseconds) may be lost. Returns whether it rotated."""
    path, half = pod_log(directory, rank), limit_bytes // 2
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return False
    if size <= half:
        return False
    staging = directory / f"{rotated_log(directory, rank).name}.new"
    with path.open("rb") as source:
        descriptor = open_private(staging, os.O_WRONLY | os.O_TRUNC)
        with os.fdopen(descriptor, "wb") as target:
            _copy(source, target, max(0, size - half), size)
            _copy(source, target, size, min(os.fstat(source.fileno()).st_size, size + half))
    os.replace(staging, rotated_log(directory, rank))
    os.truncate(path, 0)
    return True


def _copy(source: BinaryIO, target: BinaryIO, start: int, end: int) -> None:
    source.seek(start)
    left = end - start
    while left > 0:
        chunk = source.read(min(_COPY_CHUNK_BYTES, left))
        if not chunk:
            return
        target.write(chunk)
        left -= len(chunk)
