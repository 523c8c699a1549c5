"""The server verbs as a user types them, against a real `topoq server` process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

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
    queued = topoq(server, "queue", "--team", "nlp")
    assert queued.returncode == 0, queued.stderr
    header, _, row = queued.stdout.splitlines()[:3]  # a rule under the header
    assert header.split()[:3] == ["#", "JOB", "TEAM"] and "TOPOLOGY" in header
    assert row.split()[1:3] == ["over-quota", "nlp"] and "NEVER_FITS" in row
    assert row.split()[0].isdigit()  # in line: it has a turn
    held = topoq(server, "hold", "over-quota")
    assert held.returncode == 0 and "(held)" in held.stdout
    queued = topoq(server, "queue", "--team", "nlp")
    assert queued.stdout.splitlines()[2].split()[:3] == ["-", "over-quota", "(held)"]
    released = topoq(server, "release", "over-quota")
    assert released.returncode == 0


def test_cluster_verbs(server: dict[str, str]) -> None:
    nodes = topoq(server, "nodes")
    assert nodes.returncode == 0 and nodes.stdout.split()[:3] == ["NODE", "STATE", "GPUS"]
    first = nodes.stdout.splitlines()[2].split()[0]  # under the header and its rule
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
    node = topoq(server, "nodes").stdout.splitlines()[2].split()[0]
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


SLEEPER_FILE = """\
apiVersion: topoq.io/v1
kind: Job
metadata: {name: NAME, namespace: hyperpod-ns-vision}
spec:
  podSets:
  - name: workers
    count: 1
    requests: {nvidia.com/gpu: 8}
    command: [sleep, "120"]
"""


def structured(server: dict[str, str], output: str, *args: str | Path) -> Any:
    """What a verb printed with ``-o OUTPUT``, parsed."""
    answer = topoq(server, *args, "-o", output)
    assert answer.returncode == 0, (args, answer.stderr)
    return json.loads(answer.stdout) if output == "json" else yaml.safe_load(answer.stdout)


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_every_job_verb_prints_the_apis_answer_as_json_and_yaml(
    server: dict[str, str], tmp_path: Path, output: str
) -> None:
    """A sleeper runs; a second job waits on it (after-ok), so it can be held and released."""
    first, second = f"conv-first-{output}", f"conv-second-{output}"
    job_file = tmp_path / "sleeper.yaml"
    job_file.write_text(SLEEPER_FILE.replace("NAME", first))
    submitted = structured(server, output, "submit", job_file)
    assert submitted["id"] == first and submitted["team"] == "vision"
    assert {"submittedAt", "maxRetry", "priorityClass", "history"} <= set(submitted)
    job_file.write_text(SLEEPER_FILE.replace("NAME", second))
    waiting = structured(server, output, "submit", job_file, "--after-ok", first)
    assert waiting["dependencies"] == [{"kind": "after-ok", "job": first}]
    page = structured(server, output, "list", "--team", "vision")
    assert {"items", "total", "limit", "offset"} <= set(page)
    assert {first, second} <= {row["id"] for row in page["items"]}
    queued = structured(server, output, "queue", "--team", "vision")
    assert {"items", "total", "inLine", "limit", "offset"} <= set(queued)
    by_id = {row["id"]: row for row in queued["items"]}
    assert by_id[second]["position"] is None  # waiting on the first: not in line
    assert by_id[second]["waitingOn"] == [{"kind": "after-ok", "job": first}]
    described = structured(server, output, "describe", first)
    assert described["id"] == first and described["history"][0]["phase"] == "pending"
    explained = structured(server, output, "explain", second)
    assert explained["job"] == second and explained["phase"] == "pending"
    assert explained["dependencies"][0]["job"] == first and "fairShare" in explained
    held = structured(server, output, "hold", second)
    assert held["id"] == second and held["held"] is True
    released = structured(server, output, "release", second)
    assert not released["held"]
    for job in (second, first):
        cancelled = structured(server, output, "cancel", job)
        assert cancelled["id"] == job and cancelled["phase"] == "cancelled"
    changes = structured(server, output, "events", "--limit", "200")
    assert {"at", "job", "team", "phase", "cause"} <= set(changes[0])
    assert any(e["job"] == first and e["phase"] == "cancelled" for e in changes)


@pytest.mark.parametrize("output", ["json", "yaml"])
def test_every_cluster_verb_prints_the_apis_answer_as_json_and_yaml(
    server: dict[str, str], output: str
) -> None:
    found = structured(server, output, "nodes")
    assert {"name", "ready", "cordoned", "gpusUsed", "allocatable"} <= set(found[0])
    idle = next(node["name"] for node in found if node["gpusUsed"] == 0 and node["ready"])
    cordoned = structured(server, output, "cordon", idle)
    assert cordoned["node"]["name"] == idle and cordoned["node"]["cordoned"] is True
    assert cordoned["requeued"] == []
    assert structured(server, output, "uncordon", idle)["node"]["cordoned"] is False
    failed = structured(server, output, "node", "fail", idle)
    assert failed["node"]["ready"] is False
    assert structured(server, output, "node", "recover", idle)["node"]["ready"] is True
    drained = structured(server, output, "drain", idle)
    assert drained["node"]["cordoned"] is True and drained["requeued"] == []
    assert structured(server, output, "uncordon", idle)["node"]["cordoned"] is False
    topology = structured(server, output, "topology", "live")
    assert topology["gpus"] == 64 and {"gpusFree", "gpusUsed", "domains"} <= set(topology)
    teams = structured(server, output, "teams")
    nlp = next(team for team in teams if team["name"] == "nlp")
    assert {"fairShareWeight", "flavors", "jobs"} <= set(nlp)
    assert nlp["flavors"][0]["guaranteeGpus"] == 32
    report = structured(server, output, "report", "usage")
    assert {"start", "end", "days", "jobs"} <= set(report)
    assert structured(server, output, "version")["version"]


def test_policy_current_is_the_policy_file_as_yaml_and_the_apis_answer_as_json(
    server: dict[str, str],
) -> None:
    as_file = topoq(server, "policy", "current")
    assert as_file.returncode == 0 and as_file.stdout.startswith("# version ")
    document = yaml.safe_load(as_file.stdout)
    assert document == structured(server, "yaml", "policy", "current")
    assert document["kind"] == "Policy"
    answer = structured(server, "json", "policy", "current")
    assert answer["document"] == document and isinstance(answer["version"], int)
    table = topoq(server, "policy", "current", "-o", "table")
    assert table.returncode == 0 and "guarantee" in table.stdout and "nlp" in table.stdout
    applied = structured(server, "json", "policy", "apply", API_TESTS / "policy.yaml")
    assert applied["version"] == answer["version"] + 1 and applied["document"] == document
    said = topoq(server, "policy", "apply", API_TESTS / "policy.yaml")
    assert said.stdout == f"policy version {applied['version'] + 1} is in force\n"


def test_the_tables_have_headers_and_count_in_the_singular_for_one(
    server: dict[str, str], tmp_path: Path
) -> None:
    job_file = tmp_path / "one.yaml"
    job_file.write_text(SLEEPER_FILE.replace("NAME", "conv-table"))
    submitted = topoq(server, "submit", job_file)
    assert submitted.stdout.startswith("conv-table submitted to team vision ("), submitted.stderr
    listing = topoq(server, "list", "--team", "vision", "--limit", "1").stdout
    assert listing.split()[:2] == ["JOB", "TEAM"], listing
    total = structured(server, "json", "list", "--team", "vision")["total"]
    assert listing.splitlines()[-1] == f"1 of {total} job{'' if total == 1 else 's'}", listing
    none = topoq(server, "list", "--team", "vision", "--phase", "failed").stdout
    assert none.splitlines()[-1] == "0 of 0 jobs", none
    live = topoq(server, "topology", "live").stdout
    assert "(1 node)" in live and "(2 nodes)" in live and "(1 nodes)" not in live, live
    events = topoq(server, "events", "--limit", "1").stdout.splitlines()
    assert events[0].split() == ["AGE", "TIME", "JOB", "TEAM", "PHASE", "CAUSE"]
    assert set(events[1]) <= {"-", " "} and len(events) == 3, events
    teams = topoq(server, "teams").stdout
    assert teams.split()[:7] == ["TEAM", "FLAVOR", "GUARANTEE", "USED", "BORROWED", "LENT", "JOBS"]
    nodes = topoq(server, "nodes").stdout.splitlines()
    assert nodes[0].split() == ["NODE", "STATE", "GPUS", "USED", "CPU", "MEMORY", "JOBS"]
    assert set(nodes[1]) <= {"-", " "}, nodes  # the rule under the header
    assert nodes[2].split()[3:5] == ["192", "2Ti"], nodes  # CPU, MEMORY of a p5.48xlarge
    described = topoq(server, "describe", "conv-table", "-o", "table").stdout.splitlines()
    assert described[0].split() == ["FIELD", "VALUE"] and described[2].split() == [
        "job",
        "conv-table",
    ]
    history = described.index("") + 1
    assert described[history].split() == ["TIME", "PHASE", "CAUSE"], described
    assert "pending" in described[history + 2], described
    assert structured(server, "json", "cancel", "conv-table")["phase"] == "cancelled"


def test_topology_live_marks_cordoned_and_failed_nodes(server: dict[str, str]) -> None:
    found = structured(server, "json", "nodes")
    first, second = [n["name"] for n in found if n["gpusUsed"] == 0 and n["ready"]][:2]
    assert topoq(server, "cordon", first).returncode == 0
    assert topoq(server, "node", "fail", second).returncode == 0
    try:
        live = topoq(server, "topology", "live")
        assert live.returncode == 0, live.stderr
        lines = live.stdout.splitlines()
        assert any(first in line and line.rstrip().endswith("CORDONED") for line in lines)
        assert any(second in line and line.rstrip().endswith("FAILED") for line in lines)
        assert "cordoned: takes no new work" in live.stdout
        shallow = topoq(server, "topology", "live", "--depth", "1").stdout
        assert "(1 failed, 1 cordoned)" in shallow, shallow
        nodes = topoq(server, "nodes").stdout
        states = {line.split()[0]: line.split()[1] for line in nodes.splitlines()[2:]}
        assert (states[first], states[second]) == ("cordoned", "failed")
    finally:
        topoq(server, "uncordon", first)
        topoq(server, "node", "recover", second)


def test_the_deprecated_json_flag_still_prints_json(server: dict[str, str]) -> None:
    for verb in (["nodes"], ["teams"], ["list"], ["topology", "live"], ["report", "usage"]):
        answer = topoq(server, *verb, "--json")
        assert answer.returncode == 0, answer.stderr
        old, new = json.loads(answer.stdout), json.loads(topoq(server, *verb, "-o", "json").stdout)
        if isinstance(old, list):  # nodes, teams: the same names (their numbers move)
            assert [item["name"] for item in old] == [item["name"] for item in new]
        else:  # a job page, the topology, a report: the same fields (the window moves)
            assert set(old) == set(new) and old.get("gpus") == new.get("gpus")
    assert "--json" not in topoq(server, "nodes", "--help").stdout


def test_errors_name_the_cli_verb_not_the_http_route(server: dict[str, str]) -> None:
    no_job = topoq(server, "describe", "no-such-job")
    assert no_job.returncode == 2 and "topoq list shows the jobs" in no_job.stderr
    no_node = topoq(server, "cordon", "no-such-node")
    assert no_node.returncode == 2 and "topoq nodes lists them" in no_node.stderr
    for answer in (no_job, no_node):
        assert "GET /" not in answer.stderr, answer.stderr


TWO_NODE_GANG = """\
apiVersion: topoq.io/v1
kind: Job
metadata: {name: NAME, namespace: hyperpod-ns-vision}
spec:
  podSets:
  - name: workers
    count: 2
    requests: {nvidia.com/gpu: 8}
    command: [sleep, "120"]
"""


def test_describe_shows_the_span_beside_the_fewest_domains_possible(
    server: dict[str, str], tmp_path: Path
) -> None:
    job_file = tmp_path / "gang.yaml"
    job_file.write_text(TWO_NODE_GANG.replace("NAME", "span-gang"))
    assert topoq(server, "submit", job_file).returncode == 0
    try:
        deadline = time.monotonic() + 30
        while (found := structured(server, "json", "describe", "span-gang"))["allocation"] is None:
            assert time.monotonic() < deadline, found
            time.sleep(0.2)
        allocation = found["allocation"]
        assert allocation["bestSpan"] == allocation["span"]  # one block of two free nodes
        assert allocation["span"]["topology.k8s.aws/network-node-layer-3"] == 1
        rows = topoq(server, "describe", "span-gang", "-o", "table").stdout.splitlines()
        span = next(row for row in rows if row.split()[:1] == ["span"])
        assert "2 hostname (as tight as it could be)" in span, rows
    finally:
        topoq(server, "cancel", "span-gang")
