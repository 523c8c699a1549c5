"""The server verbs as a user types them, against a real `topoq server` process."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from topoq.executors.local.processes import free_port
from topoq.testing.server import running_server

ROOT = Path(__file__).resolve().parents[2]
API_TESTS = ROOT / "tests" / "api"
WORKLOADS = ROOT / "examples" / "workloads"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    data_dir = tmp_path_factory.mktemp("cli-server")
    with running_server(
        data_dir,
        cluster=API_TESTS / "cluster.yaml",
        policy=API_TESTS / "policy.yaml",
        environment=os.environ | {"TOPOQ_SLEEP_S": "1"},
        through_cli=True,
    ) as running:
        yield {"TOPOQ_SERVER": running.url, "TOPOQ_TOKEN_FILE": str(data_dir / "admin-token")}


def topoq(env: dict[str, str], *args: str | Path) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TOPOQ_")} | env
    return subprocess.run(
        [sys.executable, "-m", "topoq", *map(str, args)],
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
        check=False,
    )


JOB_FILE = """\
apiVersion: topoq.io/v1
kind: Job
metadata: {name: cli-block, namespace: hyperpod-ns-nlp}
spec:
  podSets:
  - name: workers
    count: 2
    requests: {nvidia.com/gpu: 8}
    topology: {required: topology.k8s.aws/network-node-layer-3}
"""


def test_submit_list_explain_logs_and_cancel(server: dict[str, str], tmp_path: Path) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text(JOB_FILE)
    submitted = topoq(server, "submit", job_file)
    assert submitted.returncode == 0, submitted.stderr
    assert "cli-block submitted to team nlp" in submitted.stdout
    deadline = time.monotonic() + 30
    while "succeeded" not in (listing := topoq(server, "list", "--team", "nlp")).stdout:
        assert time.monotonic() < deadline, listing.stdout
        time.sleep(0.5)
    assert "cli-block" in listing.stdout and "SPAN" in listing.stdout
    logs = topoq(server, "logs", "cli-block", "--pod", "1")
    assert logs.returncode == 0 and "rank 1 of world size 2" in logs.stdout
    explained = topoq(server, "explain", "cli-block")
    assert explained.returncode == 0 and "succeeded" in explained.stdout
    cancelled = topoq(server, "cancel", "cli-block")
    assert cancelled.returncode == 2 and "already ended" in cancelled.stderr


BATCH_JOB_FILE = """\
apiVersion: batch/v1
kind: Job
metadata:
  name: cli-batch-job
  namespace: hyperpod-ns-nlp
  labels: {kueue.x-k8s.io/queue-name: hyperpod-ns-nlp-localqueue}
spec:
  suspend: true
  completionMode: Indexed
  parallelism: 2
  completions: 2
  template:
    metadata:
      annotations:
        kueue.x-k8s.io/podset-required-topology: topology.k8s.aws/network-node-layer-3
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        command: [sh, -c, 'echo "batch rank $RANK of $WORLD_SIZE"']
        resources: {limits: {nvidia.com/gpu: 8}}
"""


def test_a_kubernetes_job_manifest_submits_as_written(
    server: dict[str, str], tmp_path: Path
) -> None:
    """A batch/v1 Job, told apart by its apiVersion and kind, runs as one gang of
    ``parallelism`` pods in one layer-3 domain (its limit counts as its request)."""
    job_file = tmp_path / "job.yaml"
    job_file.write_text(BATCH_JOB_FILE)
    submitted = topoq(server, "submit", job_file)
    assert submitted.returncode == 0, submitted.stderr
    assert "cli-batch-job submitted to team nlp" in submitted.stdout
    deadline = time.monotonic() + 30
    while "succeeded" not in (shown := topoq(server, "explain", "cli-batch-job")).stdout:
        assert time.monotonic() < deadline, shown.stdout
        time.sleep(0.5)
    logs = topoq(server, "logs", "cli-batch-job", "--pod", "1")
    assert logs.returncode == 0 and "batch rank 1 of 2" in logs.stdout, logs.stdout
    wrong = BATCH_JOB_FILE.replace("completions: 2", "completions: 3")
    job_file.write_text(wrong.replace("cli-batch-job", "cli-batch-waves"))
    refused = topoq(server, "submit", job_file)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "completions (3) differs from parallelism (2)" in refused.stderr, refused.stderr


def test_a_job_the_cluster_could_never_hold_is_refused_in_one_line(
    server: dict[str, str],
) -> None:
    """8 nodes that must share one block; the tests' blocks have 2."""
    args = ("--team", "nlp", "--id", "huge", "--format", "kueue")
    refused = topoq(server, "submit", WORKLOADS / "required-block.yaml", *args)
    assert refused.returncode == 2 and refused.stdout == ""
    [line] = refused.stderr.strip().splitlines()
    assert "pod set 'workers': the job can never run here" in line, line
    assert "at most 2 of 8 pods fit in any one topology.k8s.aws/network-node-layer-3" in line
    assert "Traceback" not in refused.stderr


OVER_QUOTA_FILE = """\
apiVersion: topoq.io/v1
kind: Job
metadata: {name: over-quota, namespace: hyperpod-ns-nlp}
spec:
  podSets:
  - name: workers
    count: 7
    requests: {nvidia.com/gpu: 8}
"""


def test_a_job_over_its_teams_quota_waits_and_explain_shows_the_numbers(
    server: dict[str, str], tmp_path: Path
) -> None:
    job_file = tmp_path / "over-quota.yaml"
    job_file.write_text(OVER_QUOTA_FILE)
    assert topoq(server, "submit", job_file).returncode == 0
    deadline = time.monotonic() + 20
    while "NEVER_FITS" not in (explained := topoq(server, "explain", "over-quota")).stdout:
        assert time.monotonic() < deadline, explained.stdout
        time.sleep(0.5)
    assert "team nlp may use at most 48 nvidia.com/gpu" in explained.stdout
    assert "requested 56" in explained.stdout and "guarantee 32" in explained.stdout
    assert "would change it: ask an admin to raise nlp's borrow limit" in explained.stdout
    held = topoq(server, "hold", "over-quota")
    assert held.returncode == 0 and "(held)" in held.stdout
    released = topoq(server, "release", "over-quota")
    assert released.returncode == 0


def test_cluster_verbs(server: dict[str, str]) -> None:
    nodes = topoq(server, "nodes")
    assert nodes.returncode == 0 and nodes.stdout.split()[:3] == ["NODE", "STATE", "GPUS"]
    first = nodes.stdout.splitlines()[1].split()[0]
    assert topoq(server, "cordon", first).stdout.strip().endswith("cordoned")
    assert "schedulable" in topoq(server, "uncordon", first).stdout
    teams = topoq(server, "teams")
    assert teams.returncode == 0 and "nlp" in teams.stdout and "vision" in teams.stdout
    current = topoq(server, "policy", "current")
    assert current.returncode == 0 and "kind: Policy" in current.stdout


def test_errors_have_exit_codes_scripts_can_rely_on(server: dict[str, str], tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("apiVersion: topoq.io/v1\nkind: Job\nmetadata: {name: x}\nspec: {}\n")
    rejected = topoq(server, "submit", bad, "--team", "nlp")
    assert rejected.returncode == 2 and rejected.stderr.startswith("error: ")
    assert "Traceback" not in rejected.stderr
    unauthorized = topoq({**server, "TOPOQ_TOKEN": "wrong"}, "list")
    assert unauthorized.returncode == 4
    unreachable = topoq({"TOPOQ_SERVER": f"http://127.0.0.1:{free_port()}"}, "list")
    assert unreachable.returncode == 3 and "topoq server" in unreachable.stderr


def test_a_job_id_cannot_reach_another_route(server: dict[str, str]) -> None:
    """`topoq cancel '../nodes/NODE/cordon?'` once cordoned the node: the client pasted the id
    into the path, httpx resolved the dot segments and `?` cut off the `/cancel`."""
    node = topoq(server, "nodes").stdout.splitlines()[1].split()[0]
    for crafted in (f"../nodes/{node}/cordon?", f"x/../../nodes/{node}/cordon#", "a?b#c"):
        answer = topoq(server, "cancel", crafted)
        assert answer.returncode != 0 and "Traceback" not in answer.stderr, answer.stderr
    row = next(
        line for line in topoq(server, "nodes").stdout.splitlines() if line.split()[:1] == [node]
    )
    assert row.split()[1] == "ready"  # NODE STATE …: not cordoned


HOG_FILE = """\
apiVersion: topoq.io/v1
kind: Job
metadata: {name: hog, namespace: hyperpod-ns-nlp}
spec:
  podSets:
  - name: workers
    count: 6
    requests: {nvidia.com/gpu: 8}
    command: [sleep, "300"]
"""
ONE_MORE_FILE = OVER_QUOTA_FILE.replace("over-quota", "one-more").replace("count: 7", "count: 1")


def test_explain_names_the_borrow_limit_and_the_job_to_wait_for(
    server: dict[str, str], tmp_path: Path
) -> None:
    """nlp: 32 GPUs guaranteed, 16 borrowable. ``hog`` takes 48; one more node would borrow 24."""
    for name, text in (("hog", HOG_FILE), ("one-more", ONE_MORE_FILE)):
        (tmp_path / f"{name}.yaml").write_text(text)
        assert topoq(server, "submit", tmp_path / f"{name}.yaml").returncode == 0
    deadline = time.monotonic() + 30
    while "BORROW_LIMIT_REACHED" not in (explained := topoq(server, "explain", "one-more")).stdout:
        assert time.monotonic() < deadline, explained.stdout
        time.sleep(0.5)
    out = explained.stdout
    assert "used 48, guarantee 32, borrowed 16, borrow_limit 16" in out, out
    assert "would change it: raise nlp's borrow limit on p5.48xlarge to 24 nvidia.com/gpu" in out
    assert "would change it: wait for hog to end (they free 48 nvidia.com/gpu)" in out
    for name in ("one-more", "hog"):  # the waiting one first: else it may start and end
        assert topoq(server, "cancel", name).returncode == 0


def test_a_token_file_that_is_not_there_is_one_line_for_every_server_verb(
    server: dict[str, str], tmp_path: Path
) -> None:
    missing = {**server, "TOPOQ_TOKEN_FILE": str(tmp_path / "no-such-token")}
    for verb in (["nodes"], ["list"], ["teams"], ["explain", "x"]):
        answer = topoq(missing, *verb)
        assert answer.returncode == 2, (verb, answer.stderr)
        assert "Traceback" not in answer.stderr
        assert answer.stderr.count("\n") == 1 and "no-such-token" in answer.stderr


@pytest.mark.parametrize(
    ("flag", "value"), [("--kube-qps", "0"), ("--kube-burst", "-1"), ("--kube-concurrency", "0")]
)
def test_the_kubernetes_clients_rates_are_checked_before_anything_connects(
    tmp_path: Path, flag: str, value: str
) -> None:
    port = str(free_port())
    answer = topoq(
        {},
        "server",
        "--executor",
        "kubernetes",
        "--data-dir",
        tmp_path,
        "--port",
        port,
        flag,
        value,
    )
    assert answer.returncode == 2, answer.stderr
    assert answer.stderr.startswith(f"error: {flag}: must be above 0, not {value}")
    assert "Traceback" not in answer.stderr and len(answer.stderr.strip().splitlines()) <= 2
