"""``topoq logs --follow`` through a real ``topoq server`` (issue 11): every line of every pod
exactly once, in order per pod, prefixed by its pod, and on across a requeue."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.cli.test_server_cli import topoq
from topoq.testing.server import running_server

ROOT = Path(__file__).resolve().parents[2]
API_TESTS = ROOT / "tests" / "api"
LINES = 3000
WRITER = """
import os, sys, time
rank, attempt = os.environ["RANK"], os.environ["TOPOQ_ATTEMPT"]
out = sys.stdout
for n in range(int(sys.argv[1])):
    if n % 250 == 7:  # a line written in two pieces, a moment apart
        out.write(f"attempt {attempt} rank {rank} line {n} begun")
        out.flush()
        time.sleep(0.01)
        out.write(" and ended\\n")
    else:
        out.write(f"attempt {attempt} rank {rank} line {n}\\n")
    out.flush()
    if n % 20 == 0:
        time.sleep(0.01)  # fast, yet long enough (a second or two) to be followed live
if attempt == "1" and sys.argv[2] != "0":
    time.sleep(1)  # failing, a moment after its last line
    sys.exit(int(sys.argv[2]))
"""


def _expected(attempt: int, rank: int, lines: int) -> list[str]:
    return [
        f"attempt {attempt} rank {rank} line {n}" + (" begun and ended" if n % 250 == 7 else "")
        for n in range(lines)
    ]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("follow-server")
    with running_server(
        data_dir, cluster=API_TESTS / "cluster.yaml", policy=API_TESTS / "policy.yaml"
    ) as running:
        yield {"TOPOQ_SERVER": running.url, "TOPOQ_TOKEN_FILE": str(data_dir / "admin-token")}


def _submit(env: dict[str, str], tmp_path: Path, name: str, pods: int, *command: str) -> None:
    job = {
        "apiVersion": "topoq.io/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "hyperpod-ns-nlp"},
        "spec": {
            "podSets": [
                {
                    "name": "writers",
                    "count": pods,
                    "requests": {"nvidia.com/gpu": 1},
                    "command": [sys.executable, "-c", WRITER, *command],
                }
            ]
        },
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(json.dumps(job))  # JSON is YAML
    submitted = topoq(env, "submit", path, "--max-retry", "1")
    assert submitted.returncode == 0, submitted.stderr


def test_follow_prints_every_line_of_eight_fast_pods_once_in_order_prefixed(
    server: dict[str, str], tmp_path: Path
) -> None:
    _submit(server, tmp_path, "eight-writers", 8, str(LINES), "0")
    started = time.monotonic()
    followed = topoq(server, "logs", "eight-writers", "--follow")
    assert followed.returncode == 0, followed.stderr
    assert time.monotonic() - started < 30
    by_pod: dict[int, list[str]] = {rank: [] for rank in range(8)}
    for line in followed.stdout.splitlines():
        assert line.startswith("[pod "), line
        prefix, _, rest = line.partition("] ")
        rank = int(prefix.removeprefix("[pod "))
        assert rest.startswith(f"attempt 1 rank {rank} "), line  # under its own pod's prefix
        by_pod[rank].append(rest)
    for rank, lines in by_pod.items():
        assert lines == _expected(1, rank, LINES), f"pod {rank}"


def test_follow_goes_on_across_a_requeue_and_says_so(
    server: dict[str, str], tmp_path: Path
) -> None:
    _submit(server, tmp_path, "fails-once", 1, "400", "1")  # attempt 1 exits 1 after 400 lines
    # From attempt 1 even if the follower starts late (as a loaded machine may make it).
    followed = topoq(server, "logs", "fails-once", "--follow", "--attempt", "1")
    assert followed.returncode == 0, followed.stderr
    assert followed.stdout.splitlines() == [
        *_expected(1, 0, 400),
        "--- attempt 2 started (the job was requeued) ---",
        *_expected(2, 0, 400),
    ]
    older = topoq(server, "logs", "fails-once", "--pod", "0", "--attempt", "1", "--tail", "2")
    assert older.returncode == 0, older.stderr
    assert older.stdout.splitlines() == _expected(1, 0, 400)[-2:]
    newest = topoq(server, "logs", "fails-once", "--pod", "0", "--tail", "1")
    assert newest.stdout == "attempt 2 rank 0 line 399\n"
    since = topoq(server, "logs", "fails-once", "-f", "--since", "1h", "--tail", "3")
    assert since.stdout.splitlines() == _expected(2, 0, 400)[-3:]


@pytest.mark.parametrize(
    ("arguments", "named"),
    [
        (("--since", "yesterday"), "since"),
        (("--tail", "0"), "--tail"),
        (("--attempt", "7"), "attempt"),
        (("--follow", "--pod", "0", "--offset", "5"), "--offset"),
    ],
)
def test_a_log_read_that_cannot_be_done_is_one_line_and_exit_2(
    server: dict[str, str], tmp_path: Path, arguments: tuple[str, ...], named: str
) -> None:
    if topoq(server, "logs", "one-line", "--tail", "1").returncode != 0:
        _submit(server, tmp_path, "one-line", 1, "3", "0")
        deadline = time.monotonic() + 20
        while topoq(server, "logs", "one-line", "--tail", "1").returncode != 0:
            assert time.monotonic() < deadline
            time.sleep(0.3)
    answer = topoq(server, "logs", "one-line", *arguments)
    assert answer.returncode == 2, (answer.stdout, answer.stderr)
    assert len(answer.stderr.strip().splitlines()) == 1, answer.stderr
    assert named in answer.stderr and "Traceback" not in answer.stderr
