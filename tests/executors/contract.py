"""The contract every executor passes (docs/architecture.md, rule 5).

Subclass ``ExecutorContract`` in a ``test_*.py`` module as ``Test<Name>Contract`` and override
the ``executor_factory`` fixture (``work_dir → Executor``). Pods run short Python programs
(``pod_command``) that print ``pid=<pid>`` first; ``alive`` checks those pids on this machine,
so an executor whose pods run elsewhere overrides the hooks: ``pod_command`` and
``pod_environment`` (what makes a pod behave as the program says where it runs, e.g. the
variables KWOK plays the default workload by), ``trigger_failure`` (how the test makes a pod
fail), ``pod_pids``, ``alive`` and ``wait_for_pods``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.executors.launches import (
    Command,
    Placed,
    gang,
    place,
    poll_until,
    process_alive,
    python,
    wait_until,
)
from topoq.domain.gpu_share import GPU_SHARE, GPU_SHARING_LABEL
from topoq.domain.job import JobId
from topoq.engine.ports import (
    Executor,
    ExecutorEvent,
    ExecutorEventKind,
    ExecutorStartFailed,
    GangLaunch,
)
from topoq.testing.builders import gpu_pods, pod_set

ExecutorFactory = Callable[[Path], Executor]
STARTED, EXITED, NODE_LOST, STOPPED = (
    ExecutorEventKind.STARTED,
    ExecutorEventKind.EXITED,
    ExecutorEventKind.NODE_LOST,
    ExecutorEventKind.STOPPED,
)
_PID = "import os, sys, time; print(f'pid={os.getpid()}', flush=True)"
SLEEP = _PID + "; time.sleep(60)"
SAY_HELLO = _PID + "; print(f\"hello from rank {os.environ['RANK']}\", flush=True)"


CHECKPOINT_ON_SIGTERM = (
    "import os, signal, sys, time\n"
    "def checkpoint(*_):\n"
    "    time.sleep(1)\n"
    "    print(f'checkpoint saved by rank {os.environ[\"RANK\"]}', flush=True)\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, checkpoint)\n"
    "print(f'pid={os.getpid()}', flush=True)\n"
    "time.sleep(60)\n"
)
"""A trainer that takes a second to checkpoint on SIGTERM, then exits 0 (pid printed once the
handler is set)."""
IGNORE_SIGTERM = (
    "import os, signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print(f'pid={os.getpid()}', flush=True); time.sleep(60)"
)


PRINT_GPU_SHARE = (
    "import os\n"
    "print('devices=' + os.environ['CUDA_VISIBLE_DEVICES'], "
    "'share=' + os.environ.get('TOPOQ_GPU_SHARE', ''), flush=True)\n"
)


def exit_when_exists(trigger: Path, code: int) -> str:
    """A pod that waits until ``trigger`` exists, then exits with ``code``."""
    wait = f"while not os.path.exists({str(trigger)!r}): time.sleep(0.01)"
    return f"{_PID}\n{wait}\nsys.exit({code})"


def write_pid_then_sleep(pid_file: Path) -> str:
    """A pod that writes its pid to ``pid_file`` and sleeps."""
    return f"{_PID}; open({str(pid_file)!r}, 'w').write(str(os.getpid())); time.sleep(60)"


UNSTARTABLE = {
    "a variable name with '='": ({"A=B": "1"}, None),
    "a NUL in a variable name": ({"A\0B": "1"}, None),
    "a NUL in a variable's value": ({"A": "1\0"}, None),
    "a NUL in the command": ({}, ("python-with-a-\0",)),
    "a program name over the file-name limit": ({}, ("/" + "x" * 300,)),
}
"""What makes a gang's second pod set impossible to start: (the user's environment, that pod
set's command; ``None`` keeps the good one)."""


def of(job: str, events: list[ExecutorEvent]) -> list[ExecutorEvent]:
    return [event for event in events if event.job == job]


def ended(job: str) -> Callable[[list[ExecutorEvent]], bool]:
    return lambda events: any(e.kind in (EXITED, NODE_LOST) for e in of(job, events))


def stopped(job: str) -> Callable[[list[ExecutorEvent]], bool]:
    return lambda events: any(e.kind is STOPPED for e in of(job, events))


class ExecutorContract:
    """Behaviour every executor shows, whatever runs its pods."""

    @pytest.fixture
    def executor_factory(self) -> ExecutorFactory:
        raise NotImplementedError("a contract subclass provides executor_factory")

    @pytest.fixture
    def executor(self, executor_factory: ExecutorFactory, tmp_path: Path) -> Iterator[Executor]:
        executor = executor_factory(tmp_path / "work")
        try:
            yield executor
        finally:
            executor.close()

    # --- hooks -------------------------------------------------------------------------

    def pod_command(self, code: str) -> Command:
        return python(code)

    def pod_environment(self, code: str) -> dict[str, str]:
        """Variables every pod of a gang that runs ``code`` gets (none here)."""
        return {}

    def trigger_failure(self, executor: Executor, job: str, pod_set: str, trigger: Path) -> None:
        """Make the pod of ``pod_set`` (which runs ``exit_when_exists(trigger, 3)``) fail with
        exit code 3."""
        trigger.touch()

    def launch(self, placed: Placed, job: str, code: str, **options: Any) -> GangLaunch:
        """``job``'s launch with every pod running ``code``."""
        environment = self.pod_environment(code) | dict(options.pop("environment", {}))
        return placed.launch(
            job, command=self.pod_command(code), environment=environment, **options
        )

    def pod_pids(self, executor: Executor, job: str) -> list[int]:
        return [int(pid) for pid in re.findall(r"^pid=(\d+)$", executor.logs(JobId(job)), re.M)]

    def alive(self, pid: int) -> bool:
        return process_alive(pid)

    def still_running(self, executor: Executor, job: str) -> bool:
        return any(self.alive(pid) for pid in self.pod_pids(executor, job))

    def wait_for_pods(self, executor: Executor, job: str, pods: int) -> None:
        """Until every pod of ``job`` has printed its pid (so it surely runs)."""
        wait_until(lambda: len(self.pod_pids(executor, job)) == pods, what=f"{pods} pods")

    # --- the contract ------------------------------------------------------------------

    def test_declares_its_capabilities(self, executor: Executor) -> None:
        capabilities = executor.capabilities
        assert capabilities.name
        assert isinstance(capabilities.runs_real_processes, bool)
        assert isinstance(capabilities.can_fail_nodes, bool)
        assert isinstance(capabilities.captures_logs, bool)

    def test_a_share_of_a_gpu_runs_on_the_device_it_was_packed_on_or_is_refused(
        self, executor: Executor
    ) -> None:
        """Two pods of half a GPU share device 0 of one node open to shares; an executor that
        cannot confine a pod to part of a device refuses the gang and starts nothing."""
        shared = gang("share", pod_set("halves", 2, {GPU_SHARE: 500, "cpu": 1}))
        placed = place(shared, labels={GPU_SHARING_LABEL: "true"})
        assignments = placed.allocation("share").placement.pod_sets[0].assignments
        assert [a.gpu_devices for a in assignments] == [((0,), (0,))]
        launch = self.launch(placed, "share", PRINT_GPU_SHARE)
        if not executor.capabilities.shares_gpus:
            with pytest.raises(ExecutorStartFailed, match="share of a GPU"):
                executor.start(launch)
            assert of("share", executor.poll()) == []
            return
        executor.start(launch)
        events = of("share", poll_until(executor, ended("share")))
        assert [e.kind for e in events] == [STARTED, EXITED] and events[1].exit_code == 0
        assert sorted(re.findall(r"^devices=.*$", executor.logs(JobId("share")), re.M)) == [
            "devices=0 share=0.5",
            "devices=0 share=0.5",
        ]

    def test_a_gang_that_succeeds_reports_started_then_exited_zero(
        self, executor: Executor
    ) -> None:
        executor.start(self.launch(place(gang("ok")), "ok", SAY_HELLO))
        events = of("ok", poll_until(executor, ended("ok")))
        assert [e.kind for e in events] == [STARTED, EXITED]
        assert events[1].exit_code == 0
        assert all(e.attempt == 1 for e in events)
        assert events[0].at_s <= events[1].at_s

    def test_a_failing_pod_ends_the_gang_with_its_code_and_stops_the_others(
        self, executor: Executor, tmp_path: Path
    ) -> None:
        trigger = tmp_path / "fail-now"
        job = gang("bad", gpu_pods(2, gpus=8), gpu_pods(1, gpus=1, name="failer"))
        commands = {
            "workers": self.pod_command(SLEEP),
            "failer": self.pod_command(exit_when_exists(trigger, 3)),
        }
        launch = place(job).launch(
            "bad", commands=commands, environment=self.pod_environment(SLEEP)
        )
        executor.start(launch)
        self.wait_for_pods(executor, "bad", 3)
        self.trigger_failure(executor, "bad", "failer", trigger)
        events = of("bad", poll_until(executor, ended("bad")))
        assert [(e.kind, e.exit_code) for e in events] == [(STARTED, None), (EXITED, 3)]
        wait_until(lambda: not self.still_running(executor, "bad"), what="the gang to stop")
        assert of("bad", poll_until(executor, lambda _: True)) == []

    def test_cancel_reports_nothing_and_stops_every_pod(self, executor: Executor) -> None:
        executor.start(self.launch(place(gang("c")), "c", SLEEP))
        self.wait_for_pods(executor, "c", 2)
        executor.cancel(JobId("c"))
        wait_until(lambda: not self.still_running(executor, "c"), what="the pods to stop")
        time.sleep(0.1)
        assert [e.kind for e in of("c", executor.poll())] in ([], [STARTED])
        executor.cancel(JobId("c"))  # a second cancel is harmless
        executor.cancel(JobId("never-started"))

    def test_cancel_all_stops_every_pod_of_every_job_and_can_be_repeated(
        self, executor: Executor
    ) -> None:
        placed = place(gang("c1"), gang("c2"))
        for job in ("c1", "c2"):
            executor.start(self.launch(placed, job, SLEEP))
        for job in ("c1", "c2"):
            self.wait_for_pods(executor, job, 2)
        executor.cancel_all([JobId("c1"), JobId("c2")])
        for job in ("c1", "c2"):
            wait_until(lambda j=job: not self.still_running(executor, j), what=f"{job} to stop")
        time.sleep(0.1)
        events = executor.poll()
        assert [e.kind for e in events if e.job in ("c1", "c2")] in ([], [STARTED], [STARTED] * 2)
        executor.cancel_all([JobId("c1"), JobId("c2"), JobId("never-started")])

    def test_stop_returns_at_once_and_reports_stopped_once_every_pod_checkpointed_and_exited(
        self, executor: Executor
    ) -> None:
        executor.start(self.launch(place(gang("ckpt")), "ckpt", CHECKPOINT_ON_SIGTERM))
        self.wait_for_pods(executor, "ckpt", 2)
        began = time.monotonic()
        executor.stop(JobId("ckpt"), grace_s=20)
        assert time.monotonic() - began < 0.5  # the controller's loop does not wait
        events = of("ckpt", poll_until(executor, stopped("ckpt")))
        took = time.monotonic() - began
        assert 0.9 <= took < 10, took  # after the checkpoint, long before the grace period
        assert [e.kind for e in events if e.kind is not STARTED] == [STOPPED]
        assert events[-1].attempt == 1
        assert not self.still_running(executor, "ckpt")
        if executor.capabilities.captures_logs:
            for rank in (0, 1):
                assert f"checkpoint saved by rank {rank}" in executor.logs(JobId("ckpt"), rank)
        time.sleep(0.1)
        assert of("ckpt", executor.poll()) == []  # no EXITED for a stopped attempt

    def test_stop_kills_a_pod_that_ignores_sigterm_after_the_grace_period(
        self, executor: Executor
    ) -> None:
        executor.start(self.launch(place(gang("deaf")), "deaf", IGNORE_SIGTERM))
        self.wait_for_pods(executor, "deaf", 2)
        began = time.monotonic()
        executor.stop(JobId("deaf"), grace_s=1.0)
        time.sleep(0.5)
        assert not stopped("deaf")(executor.poll()) and self.still_running(executor, "deaf")
        poll_until(executor, stopped("deaf"))
        assert time.monotonic() - began >= 1.0
        assert not self.still_running(executor, "deaf")

    def test_stop_of_a_job_that_runs_nothing_here_reports_stopped(self, executor: Executor) -> None:
        executor.stop(JobId("nothing"), grace_s=5)
        [event] = of("nothing", poll_until(executor, stopped("nothing")))
        assert event.kind is STOPPED

    def test_cancel_of_a_gang_being_stopped_kills_it_without_the_whole_grace_period(
        self, executor: Executor
    ) -> None:
        executor.start(self.launch(place(gang("hurry")), "hurry", IGNORE_SIGTERM))
        self.wait_for_pods(executor, "hurry", 2)
        began = time.monotonic()
        executor.stop(JobId("hurry"), grace_s=60)
        executor.cancel(JobId("hurry"))
        assert time.monotonic() - began < 30
        wait_until(lambda: not self.still_running(executor, "hurry"), what="the pods to stop")

    def test_a_failed_node_loses_its_gangs_and_spares_the_others(self, executor: Executor) -> None:
        if not executor.capabilities.can_fail_nodes:
            pytest.skip("this executor cannot fail nodes on demand")
        placed = place(gang("hit"), gang("spared"))
        for job in ("hit", "spared"):
            executor.start(self.launch(placed, job, SLEEP))
            self.wait_for_pods(executor, job, 2)
        lost_node = sorted(placed.allocation("hit").nodes)[0]
        executor.fail_node(lost_node)
        events = poll_until(executor, ended("hit"))
        lost = [e for e in events if e.kind is NODE_LOST]
        assert {(e.job, e.node) for e in lost} == {(None, lost_node), ("hit", lost_node)}
        assert not [e for e in of("hit", events) if e.kind is EXITED]
        wait_until(lambda: not self.still_running(executor, "hit"), what="the lost gang to stop")
        assert self.still_running(executor, "spared")
        assert not [e for e in of("spared", executor.poll()) if e.kind is not STARTED]

    def test_a_recovered_node_runs_a_gang_again(self, executor: Executor) -> None:
        if not executor.capabilities.can_fail_nodes:
            pytest.skip("this executor cannot fail nodes on demand")
        placed = place(gang("before"))
        executor.start(self.launch(placed, "before", SLEEP))
        self.wait_for_pods(executor, "before", 2)
        node = sorted(placed.allocation("before").nodes)[0]
        executor.fail_node(node)
        poll_until(executor, ended("before"))
        executor.recover_node(node)
        executor.recover_node(node)  # twice is harmless
        again = place(gang("after"))
        assert node in again.allocation("after").nodes
        executor.start(self.launch(again, "after", SAY_HELLO))
        events = poll_until(executor, ended("after"), timeout_s=30)
        assert [e.exit_code for e in of("after", events) if e.kind is EXITED] == [0]

    def test_each_pods_output_is_captured(self, executor: Executor) -> None:
        if not executor.capabilities.captures_logs:
            pytest.skip("this executor does not capture logs")
        executor.start(self.launch(place(gang("talk")), "talk", SAY_HELLO))
        poll_until(executor, ended("talk"))
        for rank in (0, 1):
            assert f"hello from rank {rank}" in executor.logs(JobId("talk"), rank)
        everything = executor.logs(JobId("talk"))
        assert "hello from rank 0" in everything
        assert "hello from rank 1" in everything

    def test_poll_never_blocks(self, executor: Executor) -> None:
        executor.start(self.launch(place(gang("slow")), "slow", SLEEP))
        for _ in range(20):
            began = time.monotonic()
            executor.poll()
            assert time.monotonic() - began < 0.2

    def test_close_stops_everything_but_pods_that_outlive_it(
        self, executor: Executor, executor_factory: ExecutorFactory, tmp_path: Path
    ) -> None:
        placed = place(gang("a"), gang("b"))
        for job in ("a", "b"):
            executor.start(self.launch(placed, job, SLEEP))
            self.wait_for_pods(executor, job, 2)
        executor.close()
        if not executor.capabilities.pods_outlive_executor:
            wait_until(
                lambda: (
                    not (self.still_running(executor, "a") or self.still_running(executor, "b"))
                ),
                what="every pod to stop",
            )
            return
        assert self.still_running(executor, "a") and self.still_running(executor, "b")
        successor = executor_factory(tmp_path / "work")  # the next executor adopts "a" alone
        try:
            assert successor.adopt({JobId("a"): 1}) == {JobId("a")}
            wait_until(lambda: not self.still_running(successor, "b"), what="b's pods to go")
            assert self.still_running(successor, "a")
            successor.stop(JobId("a"), grace_s=5)
            events = of("a", poll_until(successor, stopped("a")))
            assert [(e.kind, e.attempt) for e in events if e.kind is not STARTED] == [(STOPPED, 1)]
        finally:
            successor.close()

    @pytest.mark.parametrize("cause", sorted(UNSTARTABLE))
    def test_a_gang_that_cannot_start_leaves_nothing_behind(
        self, executor: Executor, tmp_path: Path, cause: str
    ) -> None:
        """It raises ExecutorStartFailed or reports EXITED without STARTED; either way no pod
        of the gang runs, its GPUs are free again and no attempt is left (issue 8)."""
        environment, bad_command = UNSTARTABLE[cause]
        pid_file = tmp_path / "first-pod.pid"
        good = self.pod_command(write_pid_then_sleep(pid_file))
        environment = self.pod_environment(SLEEP) | environment
        placed = place(gang("broken", gpu_pods(1, gpus=8), gpu_pods(1, gpus=8, name="second")))
        commands = {"workers": good, "second": bad_command or good}
        launch = placed.launch("broken", commands=commands, environment=environment)
        try:
            executor.start(launch)
        except ExecutorStartFailed as error:
            assert str(error) and poll_until(executor, lambda _: True) == []
        else:
            events = of("broken", poll_until(executor, ended("broken")))
            assert [e.kind for e in events] == [EXITED] and events[0].exit_code != 0
        time.sleep(0.2)  # a pod that was left running would have written its pid by now
        if pid_file.exists() and pid_file.read_text():
            assert not self.alive(int(pid_file.read_text()))
        executor.cancel(JobId("broken"))
        assert of("broken", executor.poll()) == []
        again = self.launch(placed, "broken", SAY_HELLO, attempt=2)
        executor.start(again)
        events = of("broken", poll_until(executor, ended("broken")))
        assert [(e.kind, e.attempt, e.exit_code) for e in events] == [
            (STARTED, 2, None),
            (EXITED, 2, 0),
        ]

    def test_starting_again_replaces_the_running_attempt(self, executor: Executor) -> None:
        placed = place(gang("again"))
        executor.start(self.launch(placed, "again", SLEEP))
        self.wait_for_pods(executor, "again", 2)
        first_pids = self.pod_pids(executor, "again")
        executor.start(self.launch(placed, "again", SAY_HELLO, attempt=2))
        events = of("again", poll_until(executor, ended("again")))
        assert [(e.kind, e.attempt, e.exit_code) for e in events if e.kind is EXITED] == [
            (EXITED, 2, 0)
        ]
        wait_until(lambda: not any(self.alive(pid) for pid in first_pids), what="attempt 1")
