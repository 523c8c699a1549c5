"""A pod's processes cannot outlive it (issue 8): a child that leaves the pod's session with
``setsid()`` and a double-forked daemon that changes its working directory to ``/`` are both
stopped by cancel, by ``close``, when the gang ends by itself, and by the next executor after
the one that started them was SIGKILLed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.executors.contract import EXITED, STARTED, exit_when_exists, of, stopped
from tests.executors.launches import gang, place, poll_until, process_alive, python, wait_until
from topoq.domain.job import JobId
from topoq.executors.local import LocalExecutor
from topoq.executors.local.process_table import ProcessEntry, pod_processes

REPOSITORY = Path(__file__).resolve().parents[2]
ESCAPE = """
import os, subprocess, sys, time
child = subprocess.Popen(
    [sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True
)
print(f"escaped={child.pid}", flush=True)
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.chdir("/")
        print(f"escaped={os.getpid()}", flush=True)
        time.sleep(60)
    os._exit(0)
time.sleep(float(os.environ.get("POD_SLEEP_S", "60")))
"""
"""A pod that leaves a setsid child and a double-forked daemon in ``/``, then sleeps."""
ESCAPED_PER_POD = 2


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[LocalExecutor]:
    with LocalExecutor(tmp_path / "work", stop_grace_s=0.5) as local:
        yield local


def escaped_pids(log: str, pods: int = 2) -> list[int]:
    return [int(pid) for pid in re.findall(r"^escaped=(\d+)$", log, re.M)]


def _start_escapes(executor: LocalExecutor, job: str, sleep_s: str = "60") -> list[int]:
    launch = place(gang(job)).launch(
        job, command=python(ESCAPE), environment={"POD_SLEEP_S": sleep_s}
    )
    executor.start(launch)
    wait_until(
        lambda: len(escaped_pids(executor.logs(JobId(job)))) == 2 * ESCAPED_PER_POD,
        what="every pod's escaped processes",
    )
    pids = escaped_pids(executor.logs(JobId(job)))
    assert all(process_alive(pid) for pid in pids)
    return pids


def _all_gone(pids: list[int]) -> None:
    wait_until(lambda: not any(process_alive(pid) for pid in pids), timeout_s=5, what="escapes")


def test_cancel_stops_processes_that_left_the_pods_session(executor: LocalExecutor) -> None:
    pids = _start_escapes(executor, "leaky")
    executor.cancel(JobId("leaky"))
    assert not [pid for pid in pids if process_alive(pid)]


def test_stopped_is_reported_only_once_processes_that_left_the_pods_session_are_gone(
    executor: LocalExecutor,
) -> None:
    """A preempted gang's room is released on STOPPED: by then nothing of it may run."""
    pids = _start_escapes(executor, "leaky")
    executor.stop(JobId("leaky"), grace_s=0.5)
    poll_until(executor, stopped("leaky"))
    assert not [pid for pid in pids if process_alive(pid)]


def test_close_stops_processes_that_left_the_pods_session(tmp_path: Path) -> None:
    executor = LocalExecutor(tmp_path / "work", stop_grace_s=0.5)
    pids = _start_escapes(executor, "leaky")
    executor.close()
    assert not [pid for pid in pids if process_alive(pid)]


def test_a_gang_that_ends_by_itself_takes_its_escaped_processes_along(
    executor: LocalExecutor,
) -> None:
    pids = _start_escapes(executor, "brief", sleep_s="0.5")
    events = of("brief", poll_until(executor, lambda seen: EXITED in [e.kind for e in seen]))
    assert [(e.kind, e.exit_code) for e in events] == [(STARTED, None), (EXITED, 0)]
    # the controller keeps polling; the escapes are stopped by the next polls
    poll_until(executor, lambda _: not any(process_alive(pid) for pid in pids), timeout_s=5)


EXECUTOR_PROCESS = """
import sys, time
from pathlib import Path
from tests.executors.launches import gang, place, python
from tests.executors.test_escapes import ESCAPE
from topoq.executors.local import LocalExecutor
executor = LocalExecutor(Path(sys.argv[1]))
executor.start(place(gang("leaky")).launch("leaky", command=python(ESCAPE)))
while True:
    executor.poll()
    time.sleep(0.05)
"""


def test_the_next_executor_stops_escapes_of_a_sigkilled_one(tmp_path: Path) -> None:
    work_dir = tmp_path / "work"
    crashed = subprocess.Popen(
        [sys.executable, "-c", EXECUTOR_PROCESS, str(work_dir)],
        cwd=REPOSITORY,
        env=os.environ | {"PYTHONPATH": str(REPOSITORY)},
    )
    try:
        logs = lambda: "".join(p.read_text() for p in work_dir.glob("*/*/*/pod-*.log"))  # noqa: E731 a one-line reader
        wait_until(lambda: len(escaped_pids(logs())) == 2 * ESCAPED_PER_POD, timeout_s=20)
        pids = escaped_pids(logs())
        crashed.send_signal(signal.SIGKILL)
        crashed.wait()
        assert all(process_alive(pid) for pid in pids)
        with LocalExecutor(work_dir, stop_grace_s=0.5) as restarted:
            assert restarted.adopt({}) == set()  # the store holds nothing for them
            assert set(pids) <= set(restarted.stopped_leftovers)
        _all_gone(pids)
    finally:
        crashed.kill()
        crashed.wait()


def test_stopping_one_gang_never_reaps_the_pods_of_another(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    """Only orphans are adopted and reaped: a running pod's exit code stays its own."""
    trigger = tmp_path / "exit-now"
    placed = place(gang("kept"), gang("cancelled"))
    executor.start(placed.launch("kept", command=python(exit_when_exists(trigger, 3))))
    executor.start(placed.launch("cancelled", command=python(ESCAPE)))
    poll_until(executor, lambda seen: len([e for e in seen if e.kind is STARTED]) == 2)
    executor.cancel(JobId("cancelled"))
    trigger.touch()
    events = of("kept", poll_until(executor, lambda seen: bool(of("kept", seen))))
    assert [(e.kind, e.exit_code) for e in events] == [(EXITED, 3)]


def test_an_executor_that_carries_a_marker_itself_never_counts_its_own_children() -> None:
    """A process with this process's marker (e.g. a control plane started inside a pod) is not
    a pod of it: this process and its other children stay out of every attempt."""
    me, child, pod = os.getpid(), 10_000_001, 10_000_002
    table = {
        me: ProcessEntry(me, 1, me, me, zombie=False, marker="exec/t/j/1/0"),
        child: ProcessEntry(child, me, child, child, zombie=False, marker=None),
        pod: ProcessEntry(pod, child, pod, pod, zombie=False, marker="exec/t/j/1/1"),
    }
    assert pod_processes(table, leaders=(), marker_prefix="exec/t/j/1/") == {pod}
