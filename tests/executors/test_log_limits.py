"""Logs are bounded twice (issue 8): what a pod keeps on disk (rotation past a limit) and
what one read returns (a tail, or a range from an offset), read without loading the file."""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

from tests.executors.contract import EXITED, of
from tests.executors.launches import gang, place, poll_until, python
from topoq.domain.job import JobId
from topoq.engine.ports import ExecutorEvent, LogRequest
from topoq.executors.environment import PodPlan
from topoq.executors.local import LocalExecutor
from topoq.executors.local.layout import attempt_dir, make_private_directories, pod_log
from topoq.executors.local.logfiles import read_logs, write_manifest
from topoq.testing.builders import gpu_pods

MIB = 1 << 20
CHATTY = """
import sys, time
line = b"x" * 1023 + b"\\n"
for block in range(4 * 32):  # 32 MiB in blocks of 256 KiB, about 16 MiB/s
    sys.stdout.buffer.write(line * 256)
    sys.stdout.buffer.flush()
    time.sleep(0.015)
sys.stdout.buffer.write(b"the last line\\n")
"""


def _disk_bytes(directory: Path) -> int:
    return sum(path.stat().st_size for path in directory.glob("pod-0.log*"))


def test_a_pod_that_writes_far_more_than_the_limit_keeps_at_most_the_limit(
    tmp_path: Path,
) -> None:
    limit = 2 * MIB
    with LocalExecutor(tmp_path / "work", pod_log_limit_bytes=limit) as executor:
        placed = place(gang("chatty", gpu_pods(1, gpus=8)))
        executor.start(placed.launch("chatty", command=python(CHATTY)))
        directory = attempt_dir(executor.work_dir, "t", "chatty", 1)
        largest = 0

        def watch(events: list[ExecutorEvent]) -> bool:
            nonlocal largest
            largest = max(largest, _disk_bytes(directory))
            return any(e.kind is EXITED for e in of("chatty", events))

        events = poll_until(executor, watch, timeout_s=60)
        assert [e.exit_code for e in of("chatty", events) if e.kind is EXITED] == [0]
        overshoot = MIB  # what the pod writes between two polls, with room to spare
        assert largest <= limit + overshoot, largest
        assert _disk_bytes(directory) <= limit + overshoot
        assert (directory / "pod-0.log.1").exists(), "the log was never rotated"
        assert executor.logs(JobId("chatty"), 0).endswith("the last line\n")


def _one_pod_attempt(work_dir: Path, size_bytes: int) -> Path:
    directory = attempt_dir(work_dir, "vision", "big", 1)
    make_private_directories(directory, work_dir)
    write_manifest(directory, [PodPlan(0, "w", "n00", 0, 1, 0, 0)])
    with pod_log(directory, 0).open("wb") as log:
        log.truncate(size_bytes - len(b"the end\n"))  # sparse: quick to make, huge to read
        log.seek(0, os.SEEK_END)
        log.write(b"the end\n")
    return directory


def test_a_read_of_a_huge_log_returns_at_most_the_cap_without_loading_the_file(
    tmp_path: Path,
) -> None:
    _one_pod_attempt(tmp_path, 300 * MIB)
    tracemalloc.start()
    try:
        read = read_logs(tmp_path, LogRequest("vision", JobId("big"), pod=0, limit_bytes=MIB))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * MIB, f"the reader held {peak} bytes"
    assert read.truncated and read.text.endswith("the end\n")
    (pod,) = read.pods
    assert (pod.offset, pod.size_bytes, pod.next_offset) == (299 * MIB, 300 * MIB, 300 * MIB)
    assert len(read.text.encode()) == MIB


def test_forward_reads_from_an_offset_return_the_log_piece_by_piece(tmp_path: Path) -> None:
    directory = attempt_dir(tmp_path, "t", "j", 1)
    make_private_directories(directory, tmp_path)
    write_manifest(directory, [PodPlan(0, "w", "n00", 0, 1, 0, 0)])
    content = b"".join(f"line {n}\n".encode() for n in range(1000))
    pod_log(directory, 0).write_bytes(content)
    pieces, offset = [], 0
    while True:
        read = read_logs(
            tmp_path, LogRequest("t", JobId("j"), pod=0, offset=offset, limit_bytes=700)
        )
        (pod,) = read.pods
        assert len(read.text.encode()) <= 700 and pod.offset == offset
        if not read.text:
            break
        pieces.append(read.text)
        assert read.truncated is (pod.next_offset < len(content))
        offset = pod.next_offset
    assert "".join(pieces).encode() == content


def test_a_read_of_every_pod_shares_the_cap_between_them(tmp_path: Path) -> None:
    directory = attempt_dir(tmp_path, "t", "j", 1)
    make_private_directories(directory, tmp_path)
    write_manifest(directory, [PodPlan(rank, "w", "n00", rank, 4, 0, 0) for rank in range(4)])
    for rank in range(4):
        pod_log(directory, rank).write_bytes(f"pod {rank}\n".encode() * 100_000)
    read = read_logs(tmp_path, LogRequest("t", JobId("j"), limit_bytes=64 * 1024))
    assert read.truncated and [pod.rank for pod in read.pods] == [0, 1, 2, 3]
    assert sum(len(pod.text.encode()) for pod in read.pods) <= 64 * 1024
    assert all(pod.text.endswith(f"pod {pod.rank}\n") for pod in read.pods)
    assert "==> job j attempt 1 pod 3 (w on n00) <==" in read.text


def test_a_tail_read_reaches_back_into_the_rotated_part(tmp_path: Path) -> None:
    directory = attempt_dir(tmp_path, "t", "j", 1)
    make_private_directories(directory, tmp_path)
    write_manifest(directory, [PodPlan(0, "w", "n00", 0, 1, 0, 0)])
    (directory / "pod-0.log.1").write_bytes(b"older\n" * 10)
    pod_log(directory, 0).write_bytes(b"newer\n")
    read = read_logs(tmp_path, LogRequest("t", JobId("j"), pod=0, limit_bytes=18))
    assert read.text == "older\nolder\nnewer\n" and read.truncated


def test_an_attempt_without_a_readable_manifest_reads_as_no_pods(tmp_path: Path) -> None:
    directory = attempt_dir(tmp_path, "t", "j", 1)
    make_private_directories(directory, tmp_path)
    (directory / "pods.json").write_text("{not json")
    assert read_logs(tmp_path, LogRequest("t", JobId("j"))).pods == ()
