"""The local executor: the contract, and what only real local processes show — the launcher
environment of every rank, GPU indices, rendezvous, process trees and log files."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.executors.contract import (
    EXITED,
    IGNORE_SIGTERM,
    NODE_LOST,
    SLEEP,
    STARTED,
    STOPPED,
    ExecutorContract,
    ExecutorFactory,
    ended,
    exit_when_exists,
    of,
    stopped,
)
from tests.executors.launches import gang, place, poll_until, process_alive, python
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId
from topoq.engine.ports import Executor, ExecutorEventKind, ExecutorStartFailed, UnknownJob
from topoq.executors.local import LocalExecutor
from topoq.testing.builders import gpu_pods, pod_set

DUMP_ENVIRONMENT = "import json, os; print('ENV=' + json.dumps(dict(os.environ)), flush=True)"


class TestLocalExecutorContract(ExecutorContract):
    @pytest.fixture
    def executor_factory(self) -> ExecutorFactory:
        return lambda work_dir: LocalExecutor(work_dir, stop_grace_s=1.0)


class TestLocalExecutorKeepingPodsContract(ExecutorContract):
    """``pods_outlive_executor``: what ``topoq server --keep-pods-on-exit`` runs."""

    @pytest.fixture
    def executor_factory(self) -> ExecutorFactory:
        return lambda work_dir: LocalExecutor(
            work_dir, stop_grace_s=1.0, pods_outlive_executor=True
        )

    def pod_pids(self, executor: Executor, job: str) -> list[int]:
        """From the logs of the job's team, which a successor that did not adopt it knows."""
        assert isinstance(executor, LocalExecutor)
        logs = executor.logs(JobId(job), team="t")
        return [int(pid) for pid in re.findall(r"^pid=(\d+)$", logs, re.M)]


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[LocalExecutor]:
    with LocalExecutor(tmp_path / "work", stop_grace_s=0.5, clock=lambda: 42.0) as local:
        yield local


def environments(executor: LocalExecutor, job: str) -> dict[int, dict[str, str]]:
    """Each rank's environment, as dumped by ``DUMP_ENVIRONMENT`` into its log."""
    found = {}
    for rank in range(len(executor.logs(JobId(job)).split("==> ")) - 1):
        match = re.search(r"^ENV=(.*)$", executor.logs(JobId(job), rank), re.M)
        assert match, executor.logs(JobId(job), rank)
        found[rank] = json.loads(match[1])
    return found


def run_to_end(executor: LocalExecutor, job: str) -> list[ExecutorEventKind | int | None]:
    events = of(job, poll_until(executor, ended(job)))
    return [e.kind for e in events] + [events[-1].exit_code]


def test_every_rank_gets_the_environment_of_a_distributed_launcher(
    executor: LocalExecutor,
) -> None:
    job = gang("env", pod_set("launcher", 1, {"cpu": 1}), gpu_pods(5, gpus=3))
    placed = place(job)
    launch = placed.launch("env", command=python(DUMP_ENVIRONMENT), environment={"MY_FLAG": "1"})
    executor.start(launch)
    assert run_to_end(executor, "env") == [STARTED, EXITED, 0]
    env = environments(executor, "env")

    assert sorted(env) == list(range(6))
    assert {e["WORLD_SIZE"] for e in env.values()} == {"6"}
    assert [env[r]["RANK"] for r in range(6)] == ["0", "1", "2", "3", "4", "5"]
    assert [env[r]["TOPOQ_POD_SET"] for r in range(6)] == ["launcher"] + ["workers"] * 5
    assert [env[r]["TOPOQ_NODE"] for r in range(6)] == ["n00", "n00", "n00", "n01", "n01", "n02"]
    assert [env[r]["LOCAL_RANK"] for r in range(6)] == ["0", "1", "2", "0", "1", "0"]
    assert [env[r]["LOCAL_WORLD_SIZE"] for r in range(6)] == ["3", "3", "3", "2", "2", "1"]
    assert [env[r]["NODE_RANK"] for r in range(6)] == ["0", "0", "0", "1", "1", "2"]
    for rank, pod in env.items():
        assert pod["MASTER_ADDR"] == "127.0.0.1"
        assert pod["MASTER_PORT"] == env[0]["MASTER_PORT"]
        assert 0 < int(pod["MASTER_PORT"]) < 65536
        assert pod["TOPOQ_MASTER_NODE"] == "n00"
        assert pod["TOPOQ_JOB_ID"] == "env"
        assert pod["TOPOQ_ATTEMPT"] == "1"
        assert pod["TOPOQ_HOSTS"] == "n00,n01,n02"
        assert json.loads(pod["SM_HOSTS"]) == ["n00", "n01", "n02"]
        assert pod["SM_CURRENT_HOST"] == pod["TOPOQ_NODE"]
        assert pod["MY_FLAG"] == "1"
        labels = placed.nodes[pod["TOPOQ_NODE"]].labels
        assert json.loads(pod["TOPOQ_TOPOLOGY"]) == {
            level: labels[level] for level in ("spine", "block", "kubernetes.io/hostname")
        }
        assert pod["TOPOQ_TOPOLOGY_SPINE"] == labels["spine"]
        assert pod["TOPOQ_TOPOLOGY_BLOCK"] == labels["block"]
        assert pod["TOPOQ_TOPOLOGY_KUBERNETES_IO_HOSTNAME"] == pod["TOPOQ_NODE"]
        assert pod["SM_NUM_GPUS"] == ("0" if rank == 0 else "3")
    assert env[0]["CUDA_VISIBLE_DEVICES"] == ""


def test_gpu_indices_are_disjoint_on_a_node_within_its_gpus_and_freed_at_the_end(
    executor: LocalExecutor,
) -> None:
    placed = place(gang("big", gpu_pods(5, gpus=3)), gang("small", gpu_pods(1, gpus=2)))
    assert "n00" in placed.allocation("big").nodes & placed.allocation("small").nodes
    for job in ("big", "small"):
        executor.start(placed.launch(job, command=python(DUMP_ENVIRONMENT)))
    events = poll_until(executor, lambda seen: ended("big")(seen) and ended("small")(seen))
    assert [e.exit_code for e in events if e.kind is EXITED] == [0, 0]
    by_node: dict[str, list[int]] = {}
    for job, wanted in (("big", 3), ("small", 2)):
        for pod in environments(executor, job).values():
            indices = [int(i) for i in pod["CUDA_VISIBLE_DEVICES"].split(",")]
            assert len(indices) == wanted
            by_node.setdefault(pod["TOPOQ_NODE"], []).extend(indices)
    assert sorted(by_node["n00"]) == list(range(8))  # 2 × 3 for "big", 2 for "small"
    for indices in by_node.values():
        assert len(indices) == len(set(indices))
        assert all(0 <= index < 8 for index in indices)

    executor.start(placed.launch("small", command=python(DUMP_ENVIRONMENT), attempt=2))
    assert run_to_end(executor, "small")[-1] == 0
    assert environments(executor, "small")[0]["CUDA_VISIBLE_DEVICES"] == "0,1"


RENDEZVOUS = """
import os, socket, sys
port = int(os.environ["MASTER_PORT"])
if os.environ["RANK"] == "0":
    with socket.create_server((os.environ["MASTER_ADDR"], port)) as server:
        server.settimeout(10)
        connection, _ = server.accept()
        print("rank 0 got", connection.recv(64).decode(), flush=True)
        connection.close()
else:
    import time
    for _ in range(500):
        try:
            with socket.create_connection((os.environ["MASTER_ADDR"], port), timeout=1) as peer:
                peer.sendall(f"hello from rank {os.environ['RANK']}".encode())
                sys.exit(0)
        except ConnectionRefusedError:
            time.sleep(0.01)
    sys.exit(1)
"""


def test_ranks_rendezvous_on_master_addr_and_port(executor: LocalExecutor) -> None:
    executor.start(place(gang("rdzv")).launch("rdzv", command=python(RENDEZVOUS)))
    assert run_to_end(executor, "rdzv") == [STARTED, EXITED, 0]
    assert "rank 0 got hello from rank 1" in executor.logs(JobId("rdzv"), 0)


def test_the_default_workload_prints_where_it_runs_and_exits_as_asked(
    executor: LocalExecutor,
) -> None:
    placed = place(gang("demo"))
    environment = {"TOPOQ_SLEEP_S": "0.05", "TOPOQ_EXIT_CODE": "4"}
    executor.start(placed.launch("demo", environment=environment))
    assert run_to_end(executor, "demo") == [STARTED, EXITED, 4]
    log = executor.logs(JobId("demo"), 1)
    assert "rank 1 of world size 2" in log
    assert "node n01" in log
    assert "topology spine=s0, block=b0, kubernetes.io/hostname=n01" in log
    assert "CUDA_VISIBLE_DEVICES=0,1,2,3,4,5,6,7" in log
    assert "exiting with 4" in log


def test_the_default_workload_runs_as_a_module_without_warnings() -> None:
    environment = os.environ | {"TOPOQ_SLEEP_S": "0", "RANK": "3", "WORLD_SIZE": "4"}
    done = subprocess.run(
        [sys.executable, "-m", "topoq.executors.default_pod"],
        env=environment,
        capture_output=True,
        text=True,
        check=True,
        timeout=10,
    )
    assert "rank 3 of world size 4" in done.stdout
    assert done.stderr == ""


def test_cancel_returns_once_the_whole_process_tree_is_gone(executor: LocalExecutor) -> None:
    spawn_grandchild = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(f'grandchild={child.pid}', flush=True)\n"
        "time.sleep(60)\n"
    )
    executor.start(place(gang("tree")).launch("tree", command=python(spawn_grandchild)))
    poll_until(executor, lambda _: executor.logs(JobId("tree")).count("grandchild=") == 2)
    pids = list(executor.pids(JobId("tree")).values())
    pids += [int(pid) for pid in re.findall(r"grandchild=(\d+)", executor.logs(JobId("tree")))]
    executor.cancel(JobId("tree"))
    assert executor.pids(JobId("tree")) == {}
    poll_until(executor, lambda _: not any(process_alive(pid) for pid in pids), timeout_s=5)


def test_a_pod_that_ignores_sigterm_is_killed_after_the_grace_period(
    executor: LocalExecutor,
) -> None:
    stubborn = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "print('ignoring SIGTERM', flush=True); time.sleep(60)"
    )
    executor.start(place(gang("stubborn")).launch("stubborn", command=python(stubborn)))
    poll_until(executor, lambda _: executor.logs(JobId("stubborn")).count("ignoring") == 2)
    pids = list(executor.pids(JobId("stubborn")).values())
    executor.cancel(JobId("stubborn"))
    assert not any(process_alive(pid) for pid in pids)


def test_a_gang_being_stopped_keeps_its_gpus_until_its_last_process_is_gone(
    executor: LocalExecutor,
) -> None:
    """The same two nodes' GPUs for two gangs: the second cannot start while the first is
    still stopping (no GPU index is handed out twice), and starts once STOPPED came."""
    old, new = place(gang("old")), place(gang("new"))
    assert old.allocation("old").nodes == new.allocation("new").nodes
    executor.start(old.launch("old", command=python(IGNORE_SIGTERM)))
    poll_until(executor, lambda _: executor.logs(JobId("old")).count("pid=") == 2)
    executor.stop(JobId("old"), grace_s=1.0)
    with pytest.raises(ExecutorStartFailed, match="GPU"):
        executor.start(new.launch("new", command=python("pass")))
    poll_until(executor, stopped("old"))
    executor.start(new.launch("new", command=python("pass"), attempt=2))
    assert run_to_end(executor, "new") == [STARTED, EXITED, 0]


def test_stop_ends_the_whole_process_tree(executor: LocalExecutor) -> None:
    spawn_grandchild = (
        "import subprocess, sys, time\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "print(f'grandchild={child.pid}', flush=True)\n"
        "time.sleep(60)\n"
    )
    executor.start(place(gang("tree")).launch("tree", command=python(spawn_grandchild)))
    poll_until(executor, lambda _: executor.logs(JobId("tree")).count("grandchild=") == 2)
    pids = list(executor.pids(JobId("tree")).values())
    pids += [int(pid) for pid in re.findall(r"grandchild=(\d+)", executor.logs(JobId("tree")))]
    executor.stop(JobId("tree"), grace_s=0.5)
    poll_until(executor, stopped("tree"))
    assert not any(process_alive(pid) for pid in pids)


def test_pods_still_stopping_when_the_executor_crashed_are_stopped_by_the_next_one(
    tmp_path: Path,
) -> None:
    crashed = LocalExecutor(tmp_path / "work", stop_grace_s=0.5)
    crashed.start(place(gang("slow")).launch("slow", command=python(IGNORE_SIGTERM)))
    poll_until(crashed, lambda _: crashed.logs(JobId("slow")).count("pid=") == 2)
    pids = list(crashed.pids(JobId("slow")).values())
    crashed.stop(JobId("slow"), grace_s=60)
    with LocalExecutor(tmp_path / "work", stop_grace_s=0.5) as restarted:
        # a victim being stopped holds its nodes: adopted, and stopped again by the new one
        assert restarted.adopt({JobId("slow"): 1}) == {JobId("slow")}
        restarted.stop(JobId("slow"), grace_s=0.5)
        events = of("slow", poll_until(restarted, stopped("slow"), timeout_s=10))
        assert [e.kind for e in events] == [STARTED, STOPPED]
        assert not any(process_alive(pid) for pid in pids)
    poll_until(crashed, lambda _: not any(process_alive(pid) for pid in pids), timeout_s=5)
    crashed.close()


def test_a_pod_killed_by_a_signal_exits_with_128_plus_the_signal(
    executor: LocalExecutor,
) -> None:
    suicide = "import os, signal; os.kill(os.getpid(), signal.SIGKILL)"
    executor.start(place(gang("killed")).launch("killed", command=python(suicide)))
    assert run_to_end(executor, "killed") == [STARTED, EXITED, 128 + signal.SIGKILL]


def test_a_command_that_cannot_start_exits_127_without_starting(
    executor: LocalExecutor,
) -> None:
    executor.start(place(gang("typo")).launch("typo", command=("/no/such/program",)))
    events = of("typo", poll_until(executor, ended("typo")))
    assert [(e.kind, e.exit_code) for e in events] == [(EXITED, 127)]
    assert "could not start" in executor.logs(JobId("typo"), 0)
    assert executor.pids(JobId("typo")) == {}


def test_node_loss_events_name_the_node_and_come_before_the_jobs(
    executor: LocalExecutor,
) -> None:
    executor.start(place(gang("lost")).launch("lost", command=python(SLEEP)))
    pids = list(executor.pids(JobId("lost")).values())
    executor.fail_node("n01")
    assert not any(process_alive(pid) for pid in pids)
    events = [e for e in executor.poll() if e.kind is NODE_LOST]
    assert [(e.job, e.node, e.attempt, e.at_s) for e in events] == [
        (None, "n01", 0, 42.0),
        ("lost", "n01", 1, 42.0),
    ]


def test_logs_have_a_file_per_pod_and_outlive_the_executor(
    executor: LocalExecutor, tmp_path: Path
) -> None:
    executor.start(place(gang("kept")).launch("kept", command=python("print('kept output')")))
    run_to_end(executor, "kept")
    assert (tmp_path / "work" / "t" / "kept" / "1" / "pod-0.log").read_text() == "kept output\n"
    assert (tmp_path / "work" / "t" / "kept" / "1" / "pod-1.log").exists()
    with LocalExecutor(tmp_path / "work") as later:
        everything = later.logs(JobId("kept"), team="t")
        assert "==> job kept attempt 1 pod 0 (workers on n00) <==\nkept output" in everything
        assert "==> job kept attempt 1 pod 1 (workers on n01) <==\nkept output" in everything
        with pytest.raises(UnknownJob):
            later.logs(JobId("kept"))  # the team is not known to this executor
        with pytest.raises(UnknownJob):
            later.logs(JobId("kept"), team="other")
        with pytest.raises(UnknownJob):
            later.logs(JobId("nobody"), team="t")
        with pytest.raises(InvalidInputError, match="no pod 5"):
            later.logs(JobId("kept"), 5, team="t")


def test_launcher_variables_win_over_the_users_environment(executor: LocalExecutor) -> None:
    launch = place(gang("mine")).launch(
        "mine", command=python(DUMP_ENVIRONMENT), environment={"RANK": "99", "OMP_NUM_THREADS": "3"}
    )
    executor.start(launch)
    run_to_end(executor, "mine")
    env = environments(executor, "mine")
    assert [env[r]["RANK"] for r in (0, 1)] == ["0", "1"]
    assert env[0]["OMP_NUM_THREADS"] == "3"


def test_commands_for_a_pod_set_the_job_lacks_are_refused_before_anything_runs(
    executor: LocalExecutor,
) -> None:
    launch = place(gang("odd")).launch("odd", commands={"trainers": python("pass")})
    with pytest.raises(InvalidInputError, match="trainers"):
        executor.start(launch)
    assert executor.poll() == []


def test_pods_left_by_a_crashed_executor_are_stopped_by_the_next_one(tmp_path: Path) -> None:
    crashed = LocalExecutor(tmp_path / "work", stop_grace_s=0.5)
    crashed.start(place(gang("orphan")).launch("orphan", command=python(SLEEP)))
    poll_until(crashed, lambda events: STARTED in [e.kind for e in of("orphan", events)])
    pids = list(crashed.pids(JobId("orphan")).values())
    assert pids and all(process_alive(pid) for pid in pids)
    # a new executor on the same work directory, as after a control-plane restart
    with LocalExecutor(tmp_path / "work", stop_grace_s=0.5) as restarted:
        assert restarted.poll() == []  # nobody adopted first: everything left is stopped
        assert set(pids) <= set(restarted.stopped_leftovers)
    poll_until(crashed, lambda _: not any(process_alive(pid) for pid in pids), timeout_s=5)
    crashed.close()


def test_a_gang_whose_directory_cannot_be_made_raises_and_holds_no_gpus(
    executor: LocalExecutor,
) -> None:
    placed = place(gang("blocked", team_name="blocked"))
    (executor.work_dir / "blocked").write_text("a file where the team's directory goes\n")
    with pytest.raises(ExecutorStartFailed, match="job blocked attempt 1: could not start"):
        executor.start(placed.launch("blocked", command=python(SLEEP)))
    assert executor.pids(JobId("blocked")) == {} and executor.poll() == []
    (executor.work_dir / "blocked").unlink()
    executor.start(placed.launch("blocked", command=python("pass"), attempt=2))
    assert run_to_end(executor, "blocked") == [STARTED, EXITED, 0]  # its GPUs were free


def test_a_pod_log_limit_too_small_to_rotate_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="pod_log_limit_bytes"):
        LocalExecutor(tmp_path / "work", pod_log_limit_bytes=10)


def test_a_gang_a_crashed_executor_left_running_is_adopted_and_ends_as_its_pods_do(
    tmp_path: Path,
) -> None:
    """The crashed executor is never polled or closed again (as when its process was
    SIGKILLed): its pods run on, their keepers write their exit codes, and the next executor
    reports them — one pod that ended while nobody watched, one that ends later."""
    crashed = LocalExecutor(tmp_path / "work", stop_grace_s=0.5)
    early, late = tmp_path / "early", tmp_path / "late"
    commands = {
        "workers": python(exit_when_exists(early, 0)),
        "second": python(exit_when_exists(late, 3)),
    }
    placed = place(gang("kept", gpu_pods(1, gpus=8), gpu_pods(1, gpus=8, name="second")))
    crashed.start(placed.launch("kept", commands=commands))
    poll_until(crashed, lambda _: crashed.logs(JobId("kept")).count("pid=") == 2)
    keepers = crashed.pids(JobId("kept"))
    early.touch()  # pod 0 ends with 0 before anybody adopts it
    poll_until(crashed, lambda _: (tmp_path / "work/t/kept/1/pod-0.exit").exists())
    with LocalExecutor(tmp_path / "work", stop_grace_s=0.5) as restarted:
        assert restarted.adopt({JobId("kept"): 1, JobId("other"): 1}) == {JobId("kept")}
        assert restarted.stopped_leftovers == []
        started = of("kept", restarted.poll())
        assert [(e.kind, e.attempt) for e in started] == [(STARTED, 1)]
        assert restarted.pids(JobId("kept")) == {1: keepers[1]}  # pod 0 ended, pod 1 runs on
        late.touch()
        events = of("kept", poll_until(restarted, ended("kept")))
        assert [(e.kind, e.attempt, e.exit_code) for e in events] == [(EXITED, 1, 3)]
        assert "pod 1 (second on n01) exited with 3" in events[0].message
    crashed.close()


def test_a_gang_that_lost_a_pod_while_nobody_watched_is_not_adopted_and_the_rest_is_stopped(
    tmp_path: Path,
) -> None:
    crashed = LocalExecutor(tmp_path / "work", stop_grace_s=0.5)
    crashed.start(place(gang("torn")).launch("torn", command=python(SLEEP)))
    keepers = crashed.pids(JobId("torn"))
    poll_until(crashed, lambda _: all(process_alive(pid) for pid in keepers.values()))
    os.kill(keepers[0], signal.SIGKILL)  # no exit code written: the pod was lost
    deadline = time.monotonic() + 5  # the crashed executor is not polled: it saw nothing
    while process_alive(keepers[0]) and time.monotonic() < deadline:
        time.sleep(0.02)
    with LocalExecutor(tmp_path / "work", stop_grace_s=0.5) as restarted:
        assert restarted.adopt({JobId("torn"): 1}) == set()
        assert keepers[1] in restarted.stopped_leftovers
        assert restarted.poll() == []
    poll_until(crashed, lambda _: not process_alive(keepers[1]), timeout_s=5)
    crashed.close()


def test_an_adopted_gang_keeps_its_gpus_and_only_its_own_attempt_is_adopted(
    tmp_path: Path,
) -> None:
    crashed = LocalExecutor(tmp_path / "work", stop_grace_s=0.5)
    placed = place(gang("kept", gpu_pods(1, gpus=4)), gang("old", gpu_pods(1, gpus=4)))
    crashed.start(placed.launch("kept", command=python(SLEEP)))
    crashed.start(placed.launch("old", command=python(SLEEP)))
    poll_until(crashed, lambda _: len(crashed.pids(JobId("old"))) == 1)
    old_pid = crashed.pids(JobId("old"))[0]
    with LocalExecutor(tmp_path / "work", stop_grace_s=0.5) as restarted:
        # the store says "old" holds attempt 2 now: its attempt 1 is not adopted
        assert restarted.adopt({JobId("kept"): 1, JobId("old"): 2}) == {JobId("kept")}
        assert old_pid in restarted.stopped_leftovers
        held = {n: restarted._gpus.in_use(n) for n in ("n00", "n01")}
        assert sum(len(indices) for indices in held.values()) == 4  # its GPUs, not old's
        restarted.cancel(JobId("kept"))
        assert restarted.pids(JobId("kept")) == {}
        assert not any(restarted._gpus.in_use(n) for n in ("n00", "n01"))
    crashed.close()
