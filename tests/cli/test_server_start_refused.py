"""A server that refuses to start says why in one line and exits 2, never with a traceback:
``topoq server``, ``python -m topoq.bootstrap`` (what the demo and service units run) and
``topoq demo`` alike, on a missing or malformed cluster file, a policy the lint refuses, a
data directory that cannot be made and a port in use."""

from __future__ import annotations

import socket
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.cli.test_cluster_apply_cli import BAD_POLICY
from topoq.executors.local.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
API_CLUSTER = ROOT / "tests" / "api" / "cluster.yaml"
PROGRAMS = {
    "topoq server": ["-m", "topoq", "server"],
    "python -m topoq.bootstrap": ["-m", "topoq.bootstrap"],
}


@pytest.fixture
def port_in_use() -> Iterator[int]:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        yield taken.getsockname()[1]


def _missing_cluster(tmp_path: Path) -> tuple[list[str], str]:
    return ["--cluster", str(tmp_path / "nowhere.yaml")], "nowhere.yaml: file not found"


def _bad_yaml_cluster(tmp_path: Path) -> tuple[list[str], str]:
    bad = tmp_path / "bad.yaml"
    bad.write_text("nodes: [\n")
    return ["--cluster", str(bad)], "invalid YAML"


def _policy_the_lint_refuses(tmp_path: Path) -> tuple[list[str], str]:
    policy = tmp_path / "policy.yaml"
    policy.write_text(BAD_POLICY)  # guarantees more than the cluster has
    return ["--cluster", str(API_CLUSTER), "--policy", str(policy)], "GUARANTEES_EXCEED_CAPACITY"


def _data_dir_under_a_file(tmp_path: Path) -> tuple[list[str], str]:
    afile = tmp_path / "afile"
    afile.write_text("")
    return ["--data-dir", str(afile / "data")], "Not a directory"


REFUSALS: dict[str, Callable[[Path], tuple[list[str], str]]] = {
    "missing cluster": _missing_cluster,
    "bad YAML cluster": _bad_yaml_cluster,
    "policy the lint refuses": _policy_the_lint_refuses,
    "data directory under a file": _data_dir_under_a_file,
}


def run(program: str, options: list[str], tmp_path: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, *PROGRAMS[program], "--data-dir", str(tmp_path / "data")]
    command += ["--port", str(free_port()), *options]  # a later --data-dir, --port wins
    return subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)


def assert_refused_in_one_line(done: subprocess.CompletedProcess[str], expected: str) -> None:
    assert done.returncode == 2, (done.returncode, done.stderr)
    assert "Traceback" not in done.stderr, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1 and expected in errors[0], done.stderr


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize("refusal", REFUSALS)
def test_a_refused_start_is_one_error_line_and_exit_2(
    program: str, refusal: str, tmp_path: Path
) -> None:
    options, expected = REFUSALS[refusal](tmp_path)
    assert_refused_in_one_line(run(program, options, tmp_path), expected)
    if "cluster" in refusal:  # read before anything is made: no store left behind
        assert not (tmp_path / "data").exists()


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_port_in_use_is_one_error_line_and_exit_2(
    program: str, port_in_use: int, tmp_path: Path
) -> None:
    done = run(program, ["--port", str(port_in_use)], tmp_path)
    assert_refused_in_one_line(done, "Address already in use")


def test_the_demo_on_a_port_in_use_is_one_error_line_and_exit_2(
    port_in_use: int, tmp_path: Path
) -> None:
    command = [sys.executable, "-m", "topoq", "demo", "--quick", "--port", str(port_in_use)]
    command += ["--data-dir", str(tmp_path / "demo")]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120, check=False)
    assert_refused_in_one_line(done, "Address already in use")
    assert "Traceback" not in done.stdout, done.stdout
