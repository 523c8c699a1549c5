"""Pods' output: ``<work_dir>/<team>/<job>/<attempt>/pod-<rank>.log`` (stdout and stderr
together; paths in ``topoq.executors.local.layout``), with ``pods.json`` beside the logs naming each
rank's pod set and node. Reading needs only the directory, so logs survive the executor that
wrote them, and any attempt's logs can be read.

Both ends are bounded. A log past half the executor's limit is rotated
(``topoq.executors.local.log_rotation``); offsets are stream offsets (bytes since the pod's
first), so a reader going on from an offset neither repeats nor skips a line across a
rotation. A read returns at most its limit: the tail (reaching into ``.1`` when the log is
shorter), the last lines, a range from an offset, or what was written since a time (through
the marks of ``topoq.executors.local.log_marks``); it seeks, so a read never loads more of a
file than it returns. A forward read ends on a whole UTF-8 character."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId
from topoq.engine.ports import JobLog, LogRequest, PodLog, UnknownJob
from topoq.executors.environment import PodPlan
from topoq.executors.local.layout import job_dir, pod_log, rotated_log, write_private_text
from topoq.executors.local.log_marks import offset_since, read_marks
from topoq.executors.local.log_rotation import steady

MANIFEST = "pods.json"
_SCAN_CHUNK_BYTES = 64 << 10
_UTF8_LONGEST = 4


def write_manifest(directory: Path, plans: Sequence[PodPlan]) -> None:
    entries = [{"rank": p.rank, "pod_set": p.pod_set, "node": p.node} for p in plans]
    write_private_text(directory / MANIFEST, json.dumps(entries, indent=1) + "\n")


def attempts_with_logs(work_dir: Path, team: str, job: JobId) -> list[int]:
    """The job's attempts that have a directory here, in order. Raises UnknownJob when it
    never ran here."""
    directory = job_dir(work_dir, team, job)
    entries = directory.iterdir() if directory.is_dir() else iter(())
    attempts = sorted(int(e.name) for e in entries if e.is_dir() and e.name.isdigit())
    if not attempts:
        raise UnknownJob(f"job {job} has no logs: it never started on this executor")
    return attempts


def read_logs(work_dir: Path, request: LogRequest) -> JobLog:
    """What ``request`` asks for of one attempt's logs, the newest by default (see
    ``LogRequest``)."""
    attempts = attempts_with_logs(work_dir, request.team, request.job)
    number = attempts[-1] if request.attempt is None else request.attempt
    if number not in attempts:
        listed = ", ".join(map(str, attempts))
        raise InvalidInputError(
            f"job {request.job} has no attempt {number} with logs",
            where="attempt",
            hint=f"its attempts with logs are {listed}",
        )
    directory = job_dir(work_dir, request.team, request.job) / str(number)
    pods = _manifest(directory)
    if request.pod is not None and request.pod not in pods:
        raise InvalidInputError(
            f"job {request.job} has no pod {request.pod} in attempt {number}",
            where="pod",
            hint=f"its pods are 0..{len(pods) - 1}" if pods else "it has no pods",
        )
    if request.offset is not None and request.pod is None:
        raise InvalidInputError(
            "a read from an offset is of one pod's log", where="offset", hint="give the pod"
        )
    ranks = [request.pod] if request.pod is not None else sorted(pods)
    share = max(1, request.limit_bytes // max(1, len(ranks)))
    read = tuple(_read_pod(directory, rank, pods[rank], request, share) for rank in ranks)
    return JobLog(request.job, number, request.pod, read, latest_attempt=attempts[-1])


def _read_pod(
    directory: Path, rank: int, where: tuple[str, str], request: LogRequest, limit: int
) -> PodLog:
    def read(base: int) -> PodLog:
        with (
            _opened(rotated_log(directory, rank)) as older,
            _opened(pod_log(directory, rank)) as current,
        ):
            stream = _Stream.of(older, current, base)
            start, data = _chosen_range(stream, directory, rank, request, limit)
            end = start + len(data)
            cut = end < stream.end if _is_forward(request) else start > stream.kept_from
            return PodLog(rank, *where, _decode(data), start, end, stream.end, cut)  # fmt: skip

    return steady(directory, rank, read)


def _is_forward(request: LogRequest) -> bool:
    return request.offset is not None or (request.since_s is not None and not request.tail_lines)


def _chosen_range(
    stream: _Stream, directory: Path, rank: int, request: LogRequest, limit: int
) -> tuple[int, bytes]:
    """Where the read starts and its bytes."""
    first = stream.kept_from
    if request.offset is not None:  # past the end: from an older stream (not one of ours)
        first = request.offset if first <= request.offset <= stream.end else first
        return first, _forward(stream, first, limit)
    if request.since_s is not None:
        first = stream.line_start(offset_since(read_marks(directory, rank), request.since_s, first))
        if not request.tail_lines:
            return first, _forward(stream, first, limit)
    first = max(first, stream.end - limit)
    data = stream.read(first, stream.end)
    if not request.tail_lines:
        return first, data
    *ended, last = data.split(b"\n")
    lines = [line + b"\n" for line in ended] + ([last] if last else [])  # \r is not an end
    kept = lines[-request.tail_lines :]
    if len(kept) == len(lines) and lines and not stream.starts_line(first):
        kept = kept[1:]  # the line the limit cut into
    text = b"".join(kept)
    return stream.end - len(text), text


@dataclass(frozen=True)
class _Stream:
    """A pod's kept output as one stream: ``.log.1`` then the log, at stream offsets, as
    large as the two files were when it was made."""

    older: BinaryIO | None
    current: BinaryIO | None
    base: int
    kept_from: int
    end: int

    @classmethod
    def of(cls, older: BinaryIO | None, current: BinaryIO | None, base: int) -> _Stream:
        return cls(older, current, base, base - _size(older), base + _size(current))

    def read(self, start: int, end: int) -> bytes:
        older = b""
        if start < self.base:
            older = _read_range(self.older, start - self.kept_from, min(end, self.base) - start)
        later = max(start, self.base)
        return older + _read_range(self.current, later - self.base, end - later)

    def starts_line(self, offset: int) -> bool:
        return offset <= self.kept_from or self.read(offset - 1, offset) == b"\n"

    def line_start(self, offset: int) -> int:
        """The first line start at or after ``offset`` (the end when no line starts)."""
        if self.starts_line(offset):
            return offset
        while offset < self.end:
            chunk = self.read(offset, min(self.end, offset + _SCAN_CHUNK_BYTES))
            newline = chunk.find(b"\n")
            if newline >= 0:
                return offset + newline + 1
            offset += len(chunk) or self.end - offset
        return self.end


def _forward(stream: _Stream, first: int, limit: int) -> bytes:
    """Up to ``limit`` bytes from ``first``, ending on a whole character (one character at
    least, when a limit shorter than it would return none)."""
    data = _whole_characters(stream.read(first, min(stream.end, first + limit)))
    if data or limit >= _UTF8_LONGEST:
        return data
    return _whole_characters(stream.read(first, min(stream.end, first + _UTF8_LONGEST)))


def _size(file: BinaryIO | None) -> int:
    return 0 if file is None else os.fstat(file.fileno()).st_size


def _whole_characters(data: bytes) -> bytes:
    """``data`` without a UTF-8 character its end cuts in two (its rest comes next read)."""
    for back in range(1, min(_UTF8_LONGEST, len(data)) + 1):
        byte = data[-back]
        if byte & 0xC0 != 0x80:  # the last character's first byte
            length = 1 if byte < 0x80 else 2 if byte < 0xE0 else 3 if byte < 0xF0 else 4
            return data[:-back] if back < length else data
    return data


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
