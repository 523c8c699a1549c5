"""Reading pods' logs (issue 11): by stream offset across rotations, any attempt, the last
lines, and what was written since a time through the executor's marks."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from tests.executors.contract import EXITED, of
from tests.executors.launches import gang, place, poll_until, python
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId
from topoq.engine.ports import LogRequest
from topoq.executors.environment import PodPlan
from topoq.executors.local import LocalExecutor
from topoq.executors.local.layout import attempt_dir, make_private_directories, pod_log
from topoq.executors.local.log_marks import (
    MARK_INTERVAL_S,
    LogMark,
    MarkBook,
    offset_since,
    read_marks,
    thinned,
)
from topoq.executors.local.log_rotation import read_rotation, rotate_if_over, tend_log
from topoq.executors.local.logfiles import read_logs, write_manifest
from topoq.testing.builders import gpu_pods

JOB = JobId("j")


def _attempt(work_dir: Path, number: int = 1, pods: int = 1) -> Path:
    directory = attempt_dir(work_dir, "t", JOB, number)
    make_private_directories(directory, work_dir)
    write_manifest(directory, [PodPlan(rank, "w", "n00", rank, pods, 0, 0) for rank in range(pods)])
    return directory


def _append(directory: Path, rank: int, data: bytes) -> None:
    with pod_log(directory, rank).open("ab") as log:
        log.write(data)


def _read(work_dir: Path, **asked: object) -> str:
    return read_logs(work_dir, LogRequest("t", JOB, **asked)).text  # type: ignore[arg-type]  # LogRequest's fields


def _follow(work_dir: Path, offset: int, limit_bytes: int = 1 << 20) -> tuple[str, int]:
    """Everything from ``offset`` on, read piece by piece, and where it ended."""
    pieces = []
    while True:
        read = read_logs(
            work_dir, LogRequest("t", JOB, pod=0, offset=offset, limit_bytes=limit_bytes)
        )
        (pod,) = read.pods
        if not pod.text:
            return "".join(pieces), offset
        pieces.append(pod.text)
        offset = pod.next_offset


def test_a_reader_going_on_from_its_offset_neither_repeats_nor_skips_across_rotations(
    tmp_path: Path,
) -> None:
    directory = _attempt(tmp_path)
    book = MarkBook(directory, 0)
    seen, offset, written = [], 0, []
    for round_ in range(6):
        lines = [f"round {round_} line {n}\n" for n in range(400)]
        written += lines
        _append(directory, 0, "".join(lines).encode())
        text, offset = _follow(tmp_path, offset, limit_bytes=3000)
        seen.append(text)
        tend_log(book, 16 << 10, now_s=float(round_))  # rotates: each round writes ~7 KiB
    assert read_rotation(directory, 0).base > 0, "the log was never rotated"
    assert "".join(seen) == "".join(written)


def test_an_offset_rotated_away_reads_from_the_oldest_byte_kept(tmp_path: Path) -> None:
    directory = _attempt(tmp_path)
    _append(directory, 0, b"".join(f"old {n}\n".encode() for n in range(3000)))
    base = rotate_if_over(directory, 0, 8 << 10)
    _append(directory, 0, b"new\n")
    assert base is not None
    read = read_logs(tmp_path, LogRequest("t", JOB, pod=0, offset=10))
    (pod,) = read.pods
    assert pod.offset == base - (4 << 10) and pod.text.endswith("old 2999\nnew\n")
    assert pod.size_bytes == base + 4 and pod.next_offset == pod.size_bytes


def test_any_attempt_can_be_read_and_the_answer_names_the_newest(tmp_path: Path) -> None:
    _append(_attempt(tmp_path, 1), 0, b"first try\n")
    _append(_attempt(tmp_path, 2), 0, b"second try\n")
    older = read_logs(tmp_path, LogRequest("t", JOB, pod=0, attempt=1))
    assert (older.text, older.attempt, older.latest_attempt) == ("first try\n", 1, 2)
    newest = read_logs(tmp_path, LogRequest("t", JOB, pod=0))
    assert (newest.text, newest.attempt, newest.latest_attempt) == ("second try\n", 2, 2)
    with pytest.raises(InvalidInputError, match="no attempt 3") as raised:
        read_logs(tmp_path, LogRequest("t", JOB, attempt=3))
    assert raised.value.hint == "its attempts with logs are 1, 2"


def test_the_last_lines_of_each_pod_leave_out_a_line_the_byte_limit_cut(tmp_path: Path) -> None:
    directory = _attempt(tmp_path, pods=2)
    for rank in range(2):
        _append(directory, rank, b"".join(f"pod {rank} line {n}\n".encode() for n in range(100)))
    read = read_logs(tmp_path, LogRequest("t", JOB, tail_lines=3))
    assert [p.text for p in read.pods] == [
        "".join(f"pod {rank} line {n}\n" for n in (97, 98, 99)) for rank in range(2)
    ]
    assert all(p.truncated for p in read.pods)
    cut = _read(tmp_path, pod=0, tail_lines=50, limit_bytes=40)  # 2.5 lines fit
    assert cut == "pod 0 line 98\npod 0 line 99\n"
    assert _read(tmp_path, pod=0, tail_lines=500) == "".join(
        f"pod 0 line {n}\n" for n in range(100)
    )


def test_an_unfinished_last_line_counts_as_a_line_of_the_tail(tmp_path: Path) -> None:
    _append(_attempt(tmp_path), 0, b"one\ntwo\nthree, still being writ")
    assert _read(tmp_path, pod=0, tail_lines=2) == "two\nthree, still being writ"


def test_a_carriage_return_does_not_end_a_line_of_the_tail(tmp_path: Path) -> None:
    _append(_attempt(tmp_path), 0, b"start\n10%\r50%\r100%\n")
    assert _read(tmp_path, pod=0, tail_lines=1) == "10%\r50%\r100%\n"


def test_a_forward_read_ends_on_a_whole_character(tmp_path: Path) -> None:
    _append(_attempt(tmp_path), 0, "é€😀\n".encode())
    pieces, offset = [], 0
    for _ in range(20):
        (pod,) = read_logs(tmp_path, LogRequest("t", JOB, pod=0, offset=offset, limit_bytes=3)).pods
        pieces.append(pod.text)
        offset = pod.next_offset
    assert "".join(pieces) == "é€😀\n" and "\ufffd" not in "".join(pieces)


def test_since_starts_at_the_last_mark_before_it_on_a_line_start(tmp_path: Path) -> None:
    directory = _attempt(tmp_path)
    book = MarkBook(directory, 0)
    _append(directory, 0, b"at 100\nat 100 too, ")
    book.note(100.0, 19)
    _append(directory, 0, b"finished at 105\nat 105\n")
    book.note(105.0, 42)
    _append(directory, 0, b"at 110\n")
    book.note(110.0, 49)
    assert read_marks(directory, 0) == (LogMark(100.0, 19), LogMark(105.0, 42), LogMark(110.0, 49))
    assert (
        _read(tmp_path, pod=0, since_s=50.0)
        == "at 100\nat 100 too, finished at 105\nat 105\nat 110\n"
    )
    assert _read(tmp_path, pod=0, since_s=103.0) == "at 105\nat 110\n"  # the cut line left out
    assert _read(tmp_path, pod=0, since_s=107.0) == "at 110\n"
    assert _read(tmp_path, pod=0, since_s=200.0) == ""
    assert _read(tmp_path, pod=0, since_s=103.0, tail_lines=1) == "at 110\n"


def test_marks_are_written_once_an_interval_while_the_log_grows() -> None:
    marks = [LogMark(float(n), n * 10) for n in range(10)]
    assert offset_since(marks, 4.5, oldest=0) == 40
    assert offset_since(marks, -1.0, oldest=0) == 0
    assert offset_since(marks, 4.5, oldest=55) == 55  # rotated away before the mark
    assert thinned(marks) == (*marks[0:5:2], *marks[5:])


def test_a_mark_book_skips_marks_closer_than_the_interval_or_without_growth(
    tmp_path: Path,
) -> None:
    directory = _attempt(tmp_path)
    book = MarkBook(directory, 0)
    book.note(10.0, 0)  # nothing written yet
    book.note(10.0, 5)
    book.note(10.0 + MARK_INTERVAL_S / 2, 9)
    book.note(10.0 + MARK_INTERVAL_S, 9)
    book.note(10.0 + 3 * MARK_INTERVAL_S, 9)
    assert read_marks(directory, 0) == (LogMark(10.0, 5), LogMark(10.0 + MARK_INTERVAL_S, 9))


def test_the_local_executor_marks_its_pods_output_so_that_since_reads_only_the_later(
    tmp_path: Path,
) -> None:
    talker = python("import time\nprint('early', flush=True)\ntime.sleep(2.5)\nprint('late')\n")
    with LocalExecutor(tmp_path / "work", stop_grace_s=1.0) as executor:
        executor.start(place(gang("talk", gpu_pods(1, gpus=1))).launch("talk", command=talker))
        poll_until(executor, lambda _: "early" in executor.logs(JobId("talk"), 0))
        between = time.time() + 1.2  # past the mark of "early" by more than the interval
        events = poll_until(executor, lambda e: any(x.kind is EXITED for x in of("talk", e)))
        assert [e.exit_code for e in of("talk", events) if e.kind is EXITED] == [0]
        work = executor.work_dir
    request = LogRequest("t", JobId("talk"), pod=0, since_s=between)
    assert read_logs(work, request).text == "late\n"
    assert read_logs(work, LogRequest("t", JobId("talk"), pod=0)).text == "early\nlate\n"
