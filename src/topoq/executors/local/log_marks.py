"""When a pod's output was written: ``pod-<rank>.marks`` beside its log, one line
``<seconds since the epoch> <offset>`` per mark, meaning "by then the log held its bytes up to
this offset". Offsets are stream offsets (bytes since the pod's first, unmoved by rotation,
``topoq.executors.local.log_rotation``).

The executor writes a mark as it polls, when the log grew and the last mark is at least
``MARK_INTERVAL_S`` old. So a byte past a mark's offset was written after the mark's time,
and a byte before the next mark's offset by that mark's time: a read ``since`` a time starts
at the offset of the last mark at or before it (``offset_since``), which may show up to about
one interval of output written just before, and never leaves out output written after.

The file stays small: past ``MAX_MARKS`` lines, the older half is thinned to every other mark
(older output gets a coarser clock, recent output keeps the interval)."""

from __future__ import annotations

import bisect
import contextlib
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from topoq.executors.local.layout import log_marks, open_private, write_private_text

MARK_INTERVAL_S = 1.0
"""The precision of a read since a time: the least time between two marks of one log."""
MAX_MARKS = 8192


@dataclass(frozen=True, order=True)
class LogMark:
    at_s: float
    offset: int
    """The log's stream end at ``at_s``."""

    def line(self) -> str:
        return f"{self.at_s:.3f} {self.offset}\n"


def read_marks(directory: Path, rank: int) -> tuple[LogMark, ...]:
    """The pod's marks, oldest first; a line that does not parse (a crash cut it) is skipped."""
    try:
        text = log_marks(directory, rank).read_text(encoding="ascii", errors="replace")
    except OSError:
        return ()
    marks = []
    for line in text.splitlines():
        parts = line.split()
        with contextlib.suppress(ValueError):
            if len(parts) == 2:
                marks.append(LogMark(float(parts[0]), int(parts[1])))
    return tuple(marks)


def offset_since(marks: Sequence[LogMark], since_s: float, oldest: int) -> int:
    """Where output written at or after ``since_s`` starts, as far as the marks tell: the
    offset of the last mark at or before it, else ``oldest`` (the first byte still kept)."""
    index = bisect.bisect_right([mark.at_s for mark in marks], since_s)
    return max(oldest, marks[index - 1].offset) if index else oldest


def thinned(marks: Sequence[LogMark]) -> tuple[LogMark, ...]:
    """Every other mark of the older half, the newer half whole."""
    half = len(marks) // 2
    return (*marks[:half:2], *marks[half:])


@dataclass
class MarkBook:
    """The marks of one pod's log as its executor writes them."""

    directory: Path
    rank: int
    base: int = 0
    """The stream offset of the current log's first byte (the executor rotates it)."""
    last: LogMark | None = None
    count: int = 0

    def note(self, at_s: float, offset: int) -> None:
        """Mark that the log reached ``offset`` by ``at_s``, unless it did not grow or the
        last mark is younger than the interval."""
        last = self.last
        if last is not None and (offset <= last.offset or at_s - last.at_s < MARK_INTERVAL_S):
            return
        if last is None and offset == 0:
            return
        mark = LogMark(at_s, offset)
        descriptor = open_private(log_marks(self.directory, self.rank), os.O_WRONLY | os.O_APPEND)
        with os.fdopen(descriptor, "w", encoding="ascii") as file:
            file.write(mark.line())
        self.last, self.count = mark, self.count + 1
        if self.count > MAX_MARKS:
            kept = thinned(read_marks(self.directory, self.rank))
            text = "".join(kept_mark.line() for kept_mark in kept)
            path = log_marks(self.directory, self.rank)
            staging = path.with_name(path.name + ".new")
            write_private_text(staging, text)
            os.replace(staging, path)  # a reader sees the old marks or the new, whole
            self.count = len(kept)
