"""Rotating a pod's log without moving its offsets.

A log past half the executor's limit is rotated (copy-truncate): its newest half-limit bytes
replace ``pod-<rank>.log.1`` and the log is emptied, the pod writing on at its start (it writes
with ``O_APPEND``). Offsets a reader sees are **stream offsets**, bytes since the pod's first:
``pod-<rank>.rotation`` keeps the stream offset of the current log's first byte (``base``), so
the current log holds ``[base, base + size)`` and ``.log.1`` the bytes just before ``base``.
A follower reading on from an offset therefore never repeats a line after a rotation, and
loses one only when it fell behind by more than what the two files keep.

The copy runs up to the end of the file as it grows, then the log is truncated: what the pod
writes in the instant between the last read of the copy and the truncation (microseconds) is
lost; nothing is repeated. The rotation file carries a generation, odd while a rotation runs:
a reader (another process) reads the files between two equal even generations
(``steady``), so it never pairs a new ``.log.1`` with an old base."""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TypeVar

from topoq.executors.local.layout import (
    log_rotation,
    open_private,
    pod_log,
    rotated_log,
    write_private_text,
)
from topoq.executors.local.log_marks import MarkBook

_COPY_CHUNK_BYTES = 1 << 20
_STEADY_TRIES = 200
_STEADY_PAUSE_S = 0.005
T = TypeVar("T")


@dataclass(frozen=True)
class Rotation:
    generation: int = 0
    """Odd while a rotation runs."""
    base: int = 0
    """The stream offset of the current log's first byte: every byte rotated out before it."""


def read_rotation(directory: Path, rank: int) -> Rotation:
    """The pod's rotation state; none yet (or unreadable) reads as never rotated."""
    try:
        entry = json.loads(log_rotation(directory, rank).read_text(encoding="utf-8"))
        return Rotation(int(entry["generation"]), int(entry["base"]))
    except (OSError, ValueError, TypeError, KeyError):
        return Rotation()


def _write_rotation(directory: Path, rank: int, rotation: Rotation) -> None:
    path = log_rotation(directory, rank)
    staging = path.with_name(path.name + ".new")
    write_private_text(staging, json.dumps(rotation.__dict__) + "\n")
    os.replace(staging, path)


def steady(directory: Path, rank: int, read: Callable[[int], T]) -> T:
    """``read(base)`` of the pod's files while no rotation ran. After about a second of
    rotations in the way (or one its executor never finished: it died), reads as they are."""
    for _ in range(_STEADY_TRIES):
        before = read_rotation(directory, rank)
        if before.generation % 2 == 0:
            result = read(before.base)
            if read_rotation(directory, rank) == before:
                return result
        time.sleep(_STEADY_PAUSE_S)
    return read(read_rotation(directory, rank).base)


def rotate_if_over(directory: Path, rank: int, limit_bytes: int) -> int | None:
    """Rotate the pod's log when it holds more than half of ``limit_bytes``: its newest bytes
    (half the limit and what the pod writes during the copy, up to another half) replace
    ``pod-<rank>.log.1``, then the log is emptied. So the two files hold at most the limit,
    plus what the pod writes between two checks. Returns the new base when it rotated."""
    path, half = pod_log(directory, rank), limit_bytes // 2
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return None
    if size <= half:
        return None
    before = read_rotation(directory, rank)
    cut = 0
    _write_rotation(directory, rank, Rotation(before.generation + 1, before.base))
    try:
        staging = directory / f"{rotated_log(directory, rank).name}.new"
        with path.open("rb") as source:
            descriptor = open_private(staging, os.O_WRONLY | os.O_TRUNC)
            with os.fdopen(descriptor, "wb") as target:
                end = _copy_to_end(source, target, max(0, size - half), size + half)
        os.replace(staging, rotated_log(directory, rank))
        os.truncate(path, 0)
        cut = end
    finally:
        _write_rotation(directory, rank, Rotation(before.generation + 2, before.base + cut))
    return before.base + cut


def _copy_to_end(source: BinaryIO, target: BinaryIO, start: int, most: int) -> int:
    """Copy from ``start`` to the end of ``source`` as it grows, up to ``most``; returns
    where the copy ended."""
    source.seek(start)
    position = start
    while position < most:
        chunk = source.read(min(_COPY_CHUNK_BYTES, most - position))
        if not chunk:
            break
        target.write(chunk)
        position += len(chunk)
    return position


def tend_log(book: MarkBook, limit_bytes: int, now_s: float) -> None:
    """What the executor does to a pod's log at each poll: rotate it when over the limit,
    and mark how far it got (``MarkBook.note``). The book keeps the base it rotated to."""
    base = rotate_if_over(book.directory, book.rank, limit_bytes)
    if base is not None:
        book.base = base
    with contextlib.suppress(FileNotFoundError):
        book.note(now_s, book.base + pod_log(book.directory, book.rank).stat().st_size)
