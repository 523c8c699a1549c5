"""The server process: SIGTERM (what `kill`, systemd and the demo send) stops it *and* its pods."""

from __future__ import annotations

import contextlib
import gc
import itertools
import os
import signal
import statistics
import subprocess
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import cast

import pytest

from tests.cli.test_demo import processes_using
from tests.store.conftest import postgres_server  # noqa: F401 the fixture, for the PostgreSQL cases
from topoq.cli.demo.jobs import block_job
from topoq.client import ClientError, TopoqClient
from topoq.engine.controller import Controller
from topoq.executors.local.processes import free_port
from topoq.server.build import ensure_admin_token
from topoq.server.loop import ControllerLoop, GarbageBetweenSteps, wake_controller
from topoq.server_environment import DATABASE_URL_ENV, make_private
from topoq.store.sql_store import open_store
from topoq.testing.postgres import PostgresServer
from topoq.testing.server import (
    api_process_ids,
    running_server,
    serving_api_process_ids,
    spare_api_process_ids,
)
from topoq.wire.v1 import SubmitJobRequest

DEMO_DATA = Path(__file__).resolve().parents[2] / "src" / "topoq" / "data" / "demo"


def wait_until(check: Callable[[], object], timeout_s: float = 30) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            if check():
                return True
        except ClientError:
            pass
        time.sleep(0.1)
    return False


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds leftover processes in /proc")
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stopping_signal_stops_the_server_and_every_pod_it_runs(
    tmp_path: Path, stop: signal.Signals
) -> None:
    port = free_port()
    command = [
        sys.executable, "-m", "topoq.bootstrap", "--port", str(port), "--data-dir", str(tmp_path),
        "--cluster", str(DEMO_DATA / "cluster.yaml"), "--policy", str(DEMO_DATA / "policy.yaml"),
    ]  # fmt: skip
    with (tmp_path / "server.log").open("w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
        try:
            url = f"http://127.0.0.1:{port}"
            token = tmp_path / "admin-token"
            assert wait_until(lambda: token.exists() and TopoqClient(url, None).health())
            with TopoqClient(url, token.read_text().strip()) as client:
                client.submit(block_job("long", "nlp", "training", sleep_s=300).request())
                assert wait_until(lambda: client.job("long").phase.value == "running")
            pods = [
                p for p in processes_using(tmp_path) if "default_pod" in p and "pod_keeper" not in p
            ]
            assert len(pods) == 8
            server.send_signal(stop)
            assert server.wait(timeout=20) == 128 + stop
        finally:
            if server.poll() is None:
                server.kill()
    logged = (tmp_path / "server.log").read_text()
    assert processes_using(tmp_path) == [], logged
    assert f"server_stopped signal={stop.name}" in logged, logged


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the API process in /proc")
def test_an_api_process_that_dies_is_replaced_and_dies_with_a_killed_server(
    tmp_path: Path,
) -> None:
    port = free_port()
    command = [
        sys.executable, "-m", "topoq.bootstrap", "--port", str(port), "--data-dir", str(tmp_path),
        "--cluster", str(DEMO_DATA / "cluster.yaml"), "--policy", str(DEMO_DATA / "policy.yaml"),
    ]  # fmt: skip
    url = f"http://127.0.0.1:{port}"
    with (tmp_path / "server.log").open("w") as log:
        server = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=os.environ)
        try:
            assert wait_until(lambda: TopoqClient(url, None).health())
            assert wait_until(lambda: serving_api_process_ids(server.pid))
            [first] = serving_api_process_ids(server.pid)
            os.kill(first, signal.SIGKILL)
            assert wait_until(lambda: serving_api_process_ids(server.pid) not in ([], [first]))
            [second] = serving_api_process_ids(server.pid)
            assert wait_until(lambda: TopoqClient(url, None).health())
            others = api_process_ids(server.pid)  # the spare too, once it is started
            server.kill()  # SIGKILL: no handler runs, the kernel ends the API processes
            server.wait(timeout=10)
            for pid in {second, *others}:
                assert wait_until(lambda pid=pid: not alive(pid), timeout_s=10)
        finally:
            if server.poll() is None:
                server.kill()
    assert "an API process exited" in (tmp_path / "server.log").read_text()


def test_a_byte_on_the_wake_pipe_runs_a_step_long_before_the_timer_would() -> None:
    steps = threading.Event()

    class CountingController:
        def step(self) -> None:
            steps.set()

    loop = ControllerLoop(cast(Controller, CountingController()), interval_s=3600, min_gap_s=0)
    loop.start()
    try:
        time.sleep(0.2)
        assert not steps.is_set()  # the timer is an hour away, and nothing woke it
        wake_controller(loop.wake_fd)  # what an API process does after a submission
        assert steps.wait(timeout=30)
    finally:
        loop.stop()


def test_the_timer_counts_from_each_steps_start_not_from_its_end() -> None:
    starts: list[float] = []

    class SlowController:
        def step(self) -> None:
            starts.append(time.monotonic())
            time.sleep(0.4)  # a step that looks at a cluster takes a while

    loop = ControllerLoop(cast(Controller, SlowController()), interval_s=1.0, min_gap_s=0.1)
    loop.start()
    try:
        time.sleep(4.5)
    finally:
        loop.stop()
    gaps = [later - earlier for earlier, later in itertools.pairwise(starts)]
    assert len(gaps) >= 2
    # 1 s from start to start; counted from each step's end, after the gap a step leaves
    # (as long as it took), it was 0.4 + 0.4 + 1 = 1.8 s
    assert statistics.median(gaps) < 1.4, gaps


def test_a_new_admin_token_gets_a_name_of_its_own_when_the_files_one_is_not_valid(
    tmp_path: Path,
) -> None:
    with open_store(None, tmp_path) as store:
        path = ensure_admin_token(store, tmp_path)
        first = store.token_for(path.read_text().strip())
        assert first is not None and first.name == "admin"
        assert ensure_admin_token(store, tmp_path) == path  # still valid: kept
        assert store.token_for(path.read_text().strip()) == first
        store.revoke_token(first.id)
        ensure_admin_token(store, tmp_path)
        second = store.token_for(path.read_text().strip())
        assert second is not None and second.role == "admin" and second.name == "admin-2"
        path.write_text("not a token\n")
        ensure_admin_token(store, tmp_path)
        third = store.token_for(path.read_text().strip())
        assert third is not None and third.name == "admin-3"
        assert path.stat().st_mode & 0o777 == 0o600


# --- local exposure: private files, no password on a command line ------------------------
@contextlib.contextmanager
def demo_server(
    data_dir: Path, *options: str, environment: dict[str, str] | None = None
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """A real server on the demo's cluster and policy: its process and URL."""
    with running_server(
        data_dir,
        *options,
        cluster=DEMO_DATA / "cluster.yaml",
        policy=DEMO_DATA / "policy.yaml",
        environment=environment,
    ) as running:
        yield running.process, running.url


def loose_modes(data_dir: Path) -> list[str]:
    """Everything under ``data_dir`` (itself included) that another local user could read:
    directories not 0700, files with any group or other permission (0600, or 0700 for a
    program)."""
    found = []
    for path in [data_dir, *data_dir.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode & 0o777
        if (mode != 0o700) if path.is_dir() else (mode & 0o077 != 0):
            found.append(f"{path.relative_to(data_dir.parent)} {mode:o}")
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads pods' files through /proc")
def test_the_data_directory_and_every_file_in_it_are_private(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "runs" / "old").mkdir(parents=True)
    (data_dir / "runs" / "old" / "pod-0.log").write_text("a previous run's output\n")
    runs = data_dir / "runs"
    for path, mode in [(data_dir, 0o755), (runs, 0o755), (runs / "old", 0o775)]:
        path.chmod(mode)
    (data_dir / "runs" / "old" / "pod-0.log").chmod(0o644)
    with demo_server(data_dir) as (_, url):
        token = (data_dir / "admin-token").read_text().strip()
        with TopoqClient(url, token) as client:
            client.submit(block_job("private", "nlp", "training", sleep_s=300).request())
            assert wait_until(lambda: client.job("private").phase.value == "running")
            assert wait_until(lambda: "world size" in client.logs("private", 0).text)
        assert {p.name for p in data_dir.iterdir()} >= {"topoq.db", "topoq.db-wal", "admin-token"}
        assert loose_modes(data_dir) == []


def process_arguments(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads command lines in /proc")
@pytest.mark.parametrize("given_by", ["environment", "command line"])
def test_no_process_shows_the_database_password_on_its_command_line(
    tmp_path: Path,
    postgres_server: PostgresServer,  # noqa: F811 the fixture imported above
    given_by: str,
) -> None:
    password = "pw-9f3k2-never-shown"
    database = postgres_server.create_database()
    url = database.replace("postgresql://topoq@", f"postgresql://topoq:{password}@")
    environment = dict(os.environ)
    options: tuple[str, ...] = ()
    if given_by == "environment":
        environment[DATABASE_URL_ENV] = url
    else:
        options = ("--database", url)
    data_dir = tmp_path / "data"
    try:
        with demo_server(data_dir, *options, environment=environment) as (server, _):
            workers = api_process_ids(server.pid)
            assert workers, "no API process"
            shown = [process_arguments(pid) for pid in workers]
            if given_by == "environment":
                shown.append(process_arguments(server.pid))
            assert not [line for line in shown if password in line], shown
            assert (data_dir / "admin-token").exists() and loose_modes(data_dir) == []
        output = (tmp_path / "data.server.log").read_text()
        assert password not in output
        warned = "password is on the command line" in output
        assert warned == (given_by == "command line"), output
        assert not list(data_dir.glob("topoq.db*")), "the server used SQLite"
    finally:
        postgres_server.drop_database(database)


# --- a warmed spare API process replaces one that dies --------------------------------------
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the API processes in /proc")
def test_a_killed_api_worker_is_replaced_at_once_by_the_warmed_spare(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with demo_server(data_dir) as (server, url):
        assert wait_until(lambda: spare_api_process_ids(server.pid))
        [serving], [spare] = serving_api_process_ids(server.pid), spare_api_process_ids(server.pid)
        os.kill(serving, signal.SIGKILL)
        # the warmed spare serves, not a process started cold (how fast: benchmarks/)
        assert wait_until(lambda: serving_api_process_ids(server.pid) == [spare], timeout_s=5)
        assert wait_until(lambda: TopoqClient(url, None).health(), timeout_s=5)
        assert wait_until(lambda: spare_api_process_ids(server.pid) not in ([], [spare]))
        [next_spare] = spare_api_process_ids(server.pid)
        everyone = [serving, spare, next_spare]
    for pid in everyone:  # SIGTERM stops the serving worker and the waiting spare
        assert wait_until(lambda pid=pid: not alive(pid), timeout_s=10), pid
    assert processes_using(data_dir) == []


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the API processes in /proc")
def test_the_server_gives_up_when_its_api_processes_keep_dying(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    with demo_server(data_dir) as (server, _):
        deadline = time.monotonic() + 60
        while server.poll() is None and time.monotonic() < deadline:
            for pid in api_process_ids(server.pid):  # serving, spare or still starting
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)
        assert server.poll() == 1, (data_dir.parent / "data.server.log").read_text()
    assert "keeps exiting" in (data_dir.parent / "data.server.log").read_text()
    assert processes_using(data_dir) == []


def test_making_the_data_directory_private_leaves_what_is_not_topoqs_alone(
    tmp_path: Path,
) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("not ours")
    outside.chmod(0o644)
    data_dir = tmp_path / "data"
    (data_dir / "runs" / "job" / "0").mkdir(parents=True)
    (data_dir / "notes").mkdir()
    log = data_dir / "runs" / "job" / "0" / "pod.log"
    log.write_text("output")
    (data_dir / "topoq.db").write_text("")
    (data_dir / "link").symlink_to(outside)
    for path in (data_dir, data_dir / "runs", data_dir / "notes", log, data_dir / "topoq.db"):
        path.chmod(0o755 if path.is_dir() else 0o644)
    make_private(data_dir)
    assert data_dir.stat().st_mode & 0o777 == 0o700
    assert (data_dir / "runs" / "job").stat().st_mode & 0o777 == 0o700
    assert log.stat().st_mode & 0o777 == 0o600
    assert (data_dir / "topoq.db").stat().st_mode & 0o777 == 0o600
    assert (data_dir / "notes").stat().st_mode & 0o777 == 0o755, "not topoq's"
    assert outside.stat().st_mode & 0o777 == 0o644, "a link is not followed"


def test_the_pod_log_limit_is_an_operators_setting(tmp_path: Path) -> None:
    """``--pod-log-limit 256Ki``: a pod that writes 4 MiB leaves a rotated log, not 4 MiB."""
    data_dir = tmp_path / "data"
    writer = (
        "import sys, time\n"
        "for i in range(64):\n"
        "    sys.stdout.write(f'line {i} ' + 'x' * 65536 + '\\n'); sys.stdout.flush()\n"
        "    time.sleep(0.1)\n"
        "time.sleep(300)\n"
    )
    document = {
        "apiVersion": "topoq.io/v1",
        "kind": "Job",
        "metadata": {"name": "chatty"},
        "spec": {
            "podSets": [
                {
                    "name": "w",
                    "count": 1,
                    "requests": {"nvidia.com/gpu": 8},
                    "command": [sys.executable, "-c", writer],
                }
            ]
        },
    }
    with demo_server(data_dir, "--pod-log-limit", "256Ki") as (_, url):
        token = (data_dir / "admin-token").read_text().strip()
        with TopoqClient(url, token) as client:
            client.submit(
                SubmitJobRequest.model_validate(
                    {"format": "topoq", "team": "nlp", "document": document}
                )
            )
            assert wait_until(lambda: "line 63 " in client.logs("chatty", 0).text)
            logs = sorted(data_dir.glob("runs/*/*/*/pod-0.log*"))
            assert [path.name for path in logs] == ["pod-0.log", "pod-0.log.1"]
            assert sum(path.stat().st_size for path in logs) < 2 << 20  # 4 MiB were written


def test_a_pod_log_limit_that_is_not_a_size_is_refused_in_one_line(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "topoq", "server", "--data-dir", str(tmp_path),
         "--pod-log-limit", "lots"],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert "--pod-log-limit" in done.stderr and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_what_a_step_leaves_is_frozen_and_the_whole_heap_collected_now_and_then() -> None:
    clock = [0.0]
    garbage = GarbageBetweenSteps(clock=lambda: clock[0], interval_s=60.0)
    try:
        garbage.after_step()
        assert gc.get_freeze_count() > 0, "a step's survivors are out of the collections"

        class Cycle:
            def __init__(self) -> None:
                self.me = self

        frozen_then = weakref.ref(Cycle())  # alive at a freeze, garbage (a cycle) after it
        garbage.after_step()
        assert frozen_then() is not None, "frozen: no collection reclaims it"
        clock[0] = 61.0
        garbage.after_step()
        assert frozen_then() is None, "the periodic full collection did"
    finally:
        gc.unfreeze()


@pytest.mark.parametrize("option", ["--api-workers", "--api-spares"])
def test_more_api_processes_than_a_server_starts_is_one_line(tmp_path: Path, option: str) -> None:
    """A huge count once tried to start that many processes and hung the shell."""
    run = subprocess.run(
        [sys.executable, "-m", "topoq", "server", "--port", "0",
         "--data-dir", str(tmp_path), option, "99999999999999999999"],
        capture_output=True, text=True, timeout=60, check=False, cwd=tmp_path,
    )  # fmt: skip
    assert run.returncode == 2, run.stderr
    assert "Traceback" not in run.stderr
    assert f"{option} 99999999999999999999 is more processes than a server starts" in run.stderr
    assert not list(tmp_path.glob("*.sqlite*"))  # refused before anything was made
