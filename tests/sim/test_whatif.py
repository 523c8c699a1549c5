"""``topoq whatif``: history a real controller recorded in a real SQLite store, replayed.

The history is recorded by ``Controller.step`` on a virtual clock, through the store's own
writes, with an executor whose outcomes the test scripts the way the simulator's executor
behaves: a gang starts the moment it is admitted, runs its run time, and a victim stops the
moment it is asked to. The controller steps every ``TICK_S``, and again at the same instant
while the executor has something to report; jobs arrive and end on ticks. So every decision
of the controller falls at the instant the simulator takes the same decision, and the replay
under the policy in force must give every start at exactly its recorded time (with arrivals
or ends between ticks, the recorded starts would lag the replay's by up to one tick).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import yaml
from typer.testing import CliRunner

import topoq.sim.history as history_module
from topoq.cli.app import app
from topoq.discovery.clusterfile import cluster_from_document
from topoq.discovery.policy import load_policy
from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import TeamName
from topoq.domain.job import JobId, JobSpec
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.workload import PodSetSpec, WorkloadSpec
from topoq.engine.controller import Controller
from topoq.engine.ports import ExecutorEventKind
from topoq.sim.compare import policy_figures
from topoq.sim.engine import Simulation, SimulationResult
from topoq.sim.history import (
    RecordedHistory,
    Window,
    history_scenario,
    open_recorded_store,
    read_history,
    recorded_result,
)
from topoq.sim.log import Decision
from topoq.store import open_store
from topoq.testing.fakes import ScriptedExecutor
from topoq.testing.server import running_server, whole_node_submission

API_TESTS = Path(__file__).resolve().parents[2] / "tests" / "api"
SINCE = 1_700_000_000.0
TICK_S = 10.0
UNTIL = SINCE + 1800
FLAVOR = "ml.p5.48xlarge"
CLUSTER = {
    "apiVersion": "topoq.io/v1",
    "kind": "Cluster",
    "metadata": {"name": "whatif"},
    "generate": {"shape": [1, 2, 4], "instance_type": FLAVOR},
}
"""64 GPUs: one spine, two blocks of four 8-GPU nodes."""


def policy_document(vision_instances: int, vision_borrow_percent: int = 50) -> dict[str, object]:
    """nlp is guaranteed half the cluster, vision ``vision_instances`` nodes; the starvation
    guard is off, so that no decision depends on how often cycles run."""
    return {
        "apiVersion": "topoq.io/v1",
        "kind": "Policy",
        "metadata": {"name": "whatif"},
        "scheduling": {"starvationGuardS": 0},
        "teams": [
            {"name": "nlp", "quotas": [{"flavor": FLAVOR, "instances": 4}]},
            {
                "name": "vision",
                "borrowLimitPercent": vision_borrow_percent,
                "quotas": [{"flavor": FLAVOR, "instances": vision_instances}],
            },
        ],
    }


@dataclass(frozen=True)
class Job:
    id: str
    team: str
    at_s: float
    """Seconds after ``SINCE``."""
    pods: int
    runtime_s: float
    exit_codes: tuple[int, ...] = (0,)
    max_retry: int = 0

    def spec(self) -> JobSpec:
        pods = PodSetSpec("workers", self.pods, Resources({NVIDIA_GPU: 8}))
        workload = WorkloadSpec(self.id, (pods,))
        return JobSpec(JobId(self.id), TeamName(self.team), workload, 0.0, max_retry=self.max_retry)


JOBS = (
    Job("n1", "nlp", 0, 2, 300),
    Job("n2", "nlp", 0, 2, 300),
    Job("n3", "nlp", 10, 2, 200),  # borrows vision's idle half
    Job("v1", "vision", 20, 4, 300),  # reclaims it: n3 is preempted
    Job("v2", "vision", 30, 1, 100),  # waits for the nlp jobs to end
    Job("v3", "vision", 40, 1, 50, exit_codes=(3, 0), max_retry=1),  # fails once, retried
    Job("n4", "nlp", 600, 4, 400),
    Job("v4", "vision", 610, 2, 120),
    Job("n5", "nlp", 1500, 2, 900),  # still running at the window's end
)


class RecordingCluster:
    """A real controller and store on a virtual clock, outcomes scripted as the simulator's."""

    def __init__(self, database: Path, policy: Path) -> None:
        cluster = cluster_from_document(CLUSTER, source="test")
        self.store = open_store(f"sqlite:///{database}", database.parent)
        self.store.save_nodes(cluster.nodes, actor="topoq", now=SINCE - 60)
        self.store.save_policy(load_policy(policy), actor="admin", now=SINCE - 60)
        self.now = SINCE
        self.executor = ScriptedExecutor()
        self.controller = Controller(
            self.store, self.executor, cluster.topology, clock=lambda: self.now
        )
        self.jobs = {job.id: job for job in JOBS}
        self.ends: dict[str, float] = {}
        self.exits: dict[str, int] = {}

    def record(self, until: float) -> None:
        while self.now < until:
            for job in JOBS:
                if SINCE + job.at_s == self.now:
                    self.controller.intake.submit(job.spec(), actor=job.team)
            for job_id, end in list(self.ends.items()):
                if end == self.now:
                    self._exit(job_id)
            self._settle()
            self.now += TICK_S
        self.store.close()

    def _exit(self, job_id: str) -> None:
        codes = self.jobs[job_id].exit_codes
        code = codes[min(self.exits.get(job_id, 0), len(codes) - 1)]
        self.exits[job_id] = self.exits.get(job_id, 0) + 1
        self.executor.report(ExecutorEventKind.EXITED, job_id, exit_code=code, at=self.now)
        del self.ends[job_id]

    def _settle(self) -> None:
        """Steps at this instant until the executor has nothing more to report."""
        for _ in range(10):
            report = self.controller.step()
            for job_id in report.started:
                self.executor.report(ExecutorEventKind.STARTED, job_id, at=self.now)
                self.ends[job_id] = self.now + self.jobs[job_id].runtime_s
            for job_id in report.stopping:
                self.executor.report(ExecutorEventKind.STOPPED, job_id, at=self.now)
                self.ends.pop(job_id, None)
            if not self.executor.pending:
                return
        raise AssertionError("the controller did not settle")


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A recorded database (``topoq.db``), the policy in force and a changed one."""
    folder = tmp_path_factory.mktemp("whatif")
    (folder / "in-force.yaml").write_text(yaml.safe_dump(policy_document(4)))
    (folder / "vision-cut.yaml").write_text(yaml.safe_dump(policy_document(1, 300)))
    RecordingCluster(folder / "topoq.db", folder / "in-force.yaml").record(UNTIL + 60)
    return folder


@pytest.fixture
def history(place: Path) -> Iterator[RecordedHistory]:
    with open_recorded_store(f"sqlite:///{place / 'topoq.db'}") as store:
        yield read_history(store, Window(SINCE, UNTIL))


def starts(result: SimulationResult) -> dict[str, list[float]]:
    """Every start of every job, in seconds after the window's start."""
    found: dict[str, list[float]] = {}
    for entry in result.log:
        if entry.decision is Decision.START and entry.job is not None:
            found.setdefault(entry.job, []).append(entry.t)
    return found


def replay(history: RecordedHistory, policy_file: Path | None = None) -> SimulationResult:
    policy = history.policy if policy_file is None else load_policy(policy_file)
    return Simulation(history_scenario(history, policy, "replay")).run()


# --- (a) the policy in force reproduces what was recorded -------------------------------------
def test_the_window_holds_the_recorded_jobs_and_the_policy_then_in_force(
    history: RecordedHistory,
) -> None:
    assert [job.id for job in history.jobs] == [job.id for job in JOBS]
    assert history.policy_version.version == 1 and history.warnings == ()
    assert history.topology.levels[-1] == "kubernetes.io/hostname"
    assert len(history.topology.levels) == 3  # the two network layers the nodes carry
    recorded = recorded_result(history)
    assert recorded.still_running == ("n5",)
    assert starts(recorded)["n3"] == [10.0, 300.0]  # preempted at 20, run again at 300
    assert starts(recorded)["v3"] == [300.0, 350.0]  # its first run failed


def test_the_policy_in_force_replays_every_start_at_its_recorded_time(
    history: RecordedHistory,
) -> None:
    recorded, replayed = recorded_result(history), replay(history)
    assert starts(replayed) == starts(recorded)
    assert replayed.still_running == recorded.still_running
    for team in ("nlp", "vision"):
        mine, theirs = recorded.summary.team(team), replayed.summary.team(team)
        assert mine.wait == theirs.wait
        assert mine.gpu_hours_in_guarantee == pytest.approx(theirs.gpu_hours_in_guarantee)
        assert mine.gpu_hours_borrowed == pytest.approx(theirs.gpu_hours_borrowed)
        assert mine.preemptions_suffered == theirs.preemptions_suffered
        assert (mine.completed, mine.failed) == (theirs.completed, theirs.failed)
    assert recorded.summary.team("nlp").preemptions_suffered == 1
    figures = policy_figures("recorded", recorded), policy_figures("replayed", replayed)
    assert figures[0].wait == figures[1].wait and figures[0].makespan_s == figures[1].makespan_s


# --- (b) a changed policy -----------------------------------------------------------------------
def test_cutting_a_teams_guarantee_makes_it_wait_longer_and_preempt_nobody(
    history: RecordedHistory, place: Path
) -> None:
    before, after = replay(history), replay(history, place / "vision-cut.yaml")
    vision_before, vision_after = before.summary.team("vision"), after.summary.team("vision")
    assert vision_before.wait.mean_s is not None and vision_after.wait.mean_s is not None
    assert vision_after.wait.mean_s > vision_before.wait.mean_s
    assert after.summary.team("nlp").preemptions_suffered == 0  # vision reclaims nothing now


# --- (c) the command, end to end ------------------------------------------------------------
def whatif_args(place: Path, *more: str) -> list[str]:
    return [
        "whatif",
        "--database",
        f"sqlite:///{place / 'topoq.db'}",
        "--since",
        "2023-11-14T22:13:20Z",  # SINCE
        "--until",
        str(int(UNTIL)),
        "--policy",
        str(place / "vision-cut.yaml"),
        *more,
    ]


def topoq(*args: str) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TOPOQ_")}
    return subprocess.run(
        [sys.executable, "-m", "topoq", *args],
        capture_output=True,
        text=True,
        env=environment | {"COLUMNS": "250"},
        timeout=120,
        check=False,
    )


def test_the_command_prints_the_three_rows_and_the_differences_per_team(place: Path) -> None:
    done = topoq(*whatif_args(place))
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "9 job(s) submitted from 2023-11-14T22:13:20Z to 2023-11-14T22:43:20Z" in out
    for row in ("recorded", "replayed: policy version 1", "replayed: vision-cut.yaml"):
        assert row in out
    assert "policy in force: version 1, set at 2023-11-14T22:12:20Z" in out
    assert "Per team: vision-cut.yaml − in force" in out
    vision = next(line for line in out.splitlines() if line.strip().startswith("vision  "))
    assert "+" in vision  # vision waits longer


def test_json_gives_the_figures_of_each_run_and_the_differences(place: Path) -> None:
    done = CliRunner().invoke(app, whatif_args(place, "-o", "json"))
    assert done.exit_code == 0, done.output
    document = json.loads(done.stdout)
    assert [run["policy"] for run in document["runs"]] == [
        "recorded",
        "replayed: policy version 1",
        "replayed: vision-cut.yaml",
    ]
    recorded, in_force, _ = document["runs"]
    assert recorded["wait"] == in_force["wait"] and recorded["jobs"] == 9
    differences = {row["team"]: row for row in document["differences"]}
    assert differences["vision"]["wait_mean_s"] > 0
    assert differences["nlp"]["preemptions"] == -1
    assert document["policy_in_force"]["version"] == 1


def test_report_writes_the_three_runs_into_one_page(place: Path, tmp_path: Path) -> None:
    done = CliRunner().invoke(app, whatif_args(place, "--report", str(tmp_path / "out")))
    assert done.exit_code == 0, done.output
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "replayed: vision-cut.yaml" in page and "recorded" in page


# --- (d) bad input ------------------------------------------------------------------------------
def refused(*args: str) -> str:
    done = CliRunner().invoke(app, list(args))
    assert done.exit_code == 2, done.output
    assert "Traceback" not in done.output
    [line] = done.stderr.strip().splitlines()[-1:]
    assert line.startswith("error: "), done.stderr
    return line


def test_a_window_that_does_not_end_after_it_starts_is_refused(place: Path) -> None:
    args = whatif_args(place)
    args[args.index("--until") + 1] = str(int(SINCE))
    assert "is not after --since" in refused(*args)


def test_a_time_that_is_not_one_is_refused(place: Path) -> None:
    args = whatif_args(place)
    args[args.index("--since") + 1] = "yesterday"
    assert "--since: not a time: 'yesterday'" in refused(*args)


def test_a_window_without_jobs_says_when_the_jobs_were_submitted(place: Path) -> None:
    args = whatif_args(place)
    args[args.index("--since") + 1], args[args.index("--until") + 1] = "2020-01-01", "2020-01-02"
    line = refused(*args)
    assert "no job was submitted from 2020-01-01T00:00:00Z" in line
    assert "its jobs were submitted from 2023-11-14T22:13:20Z" in line


def test_a_database_that_is_not_topoqs_is_refused(place: Path, tmp_path: Path) -> None:
    args = whatif_args(place)
    at = args.index("--database") + 1
    args[at] = f"sqlite:///{tmp_path / 'missing.db'}"
    assert "no database file" in refused(*args)
    assert not (tmp_path / "missing.db").exists()  # nothing made
    (tmp_path / "text.db").write_text("not a database\n")
    args[at] = f"sqlite:///{tmp_path / 'text.db'}"
    assert "cannot read topoq's history" in refused(*args)
    args[at] = "mysql://x/y"
    assert "unsupported database URL scheme" in refused(*args)


def test_a_policy_that_does_not_load_or_lacks_a_team_is_refused(
    place: Path, tmp_path: Path
) -> None:
    args = whatif_args(place)
    at = args.index("--policy") + 1
    (tmp_path / "broken.yaml").write_text("apiVersion: topoq.io/v1\nkind: Policy\nteams: 3\n")
    args[at] = str(tmp_path / "broken.yaml")
    assert "broken.yaml" in refused(*args)
    nlp_only = policy_document(4) | {"teams": [{"name": "nlp"}]}
    (tmp_path / "nlp-only.yaml").write_text(yaml.safe_dump(nlp_only))
    args[at] = str(tmp_path / "nlp-only.yaml")
    assert "does not name team 'vision', whose jobs are in the window" in refused(*args)


# --- the path users take: a real server ---------------------------------------------------------
def test_a_real_servers_history_replays_under_the_policy_in_force(tmp_path: Path) -> None:
    """Jobs submitted to a real ``topoq server`` run with the local executor (each pod sleeps
    a second), the server stops, and ``topoq whatif`` reads its database. Real time is not
    ticked: only the shape of the answer and the jobs done are asserted."""
    data_dir = tmp_path / "server"
    policy = API_TESTS / "policy.yaml"
    sleep = os.environ | {"TOPOQ_SLEEP_S": "1"}
    cluster = API_TESTS / "cluster.yaml"
    with running_server(data_dir, cluster=cluster, policy=policy, environment=sleep) as server:
        token = (data_dir / "admin-token").read_text().strip()
        headers = {"Authorization": f"Bearer {token}"}
        with httpx.Client(base_url=f"{server.url}/api/v1", headers=headers, timeout=10) as client:
            for index in range(6):
                team = "nlp" if index % 2 else "vision"
                body = whole_node_submission(f"job-{index}", team, pods=3)
                assert client.post("/jobs", json=body).status_code == 201
            wait_until_done(client, 6)
            member = client.post("/tokens", json={"name": "m", "role": "member", "teams": ["nlp"]})
            member_token = member.json()["token"]
            window = (
                "--since",
                "0",
                "--until",
                "9999999999",
                "--policy",
                str(policy),
                "-o",
                "json",
            )
            from_server = topoq("whatif", "--server", server.url, "--token", token, *window)
            refused = topoq("whatif", "--server", server.url, "--token", member_token, *window)
    done = topoq("whatif", "--database", f"sqlite:///{data_dir / 'topoq.db'}", *window)
    assert done.returncode == 0, done.stderr
    runs = json.loads(done.stdout)["runs"]
    assert [run["completed"] for run in runs] == [6, 6, 6]
    # the same history read through the server's admin API: the very same figures
    assert from_server.returncode == 0, from_server.stderr
    assert json.loads(from_server.stdout)["runs"] == runs
    # a team's member may not read every team's history
    assert refused.returncode == 4 and "may not" in refused.stderr, refused.stderr
    assert "Traceback" not in refused.stderr


def test_the_history_is_read_from_a_database_or_a_server_not_both_nor_neither(
    place: Path,
) -> None:
    args = whatif_args(place)
    assert "--database and --server both given" in refused(*args, "--server", "http://x:1")
    del args[args.index("--database") : args.index("--database") + 2]
    assert "--database or --server" in refused(*args)


def wait_until_done(client: httpx.Client, jobs: int) -> None:
    deadline = time.monotonic() + 60
    while client.get("/jobs", params={"phase": "succeeded"}).json()["total"] < jobs:
        assert time.monotonic() < deadline, client.get("/jobs").json()
        time.sleep(0.5)


def test_a_window_of_more_jobs_than_a_what_if_replays_is_refused_before_reading_them(
    place: Path, history: RecordedHistory, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_recorded_store(f"sqlite:///{place / 'topoq.db'}") as store:
        assert store.count_jobs_submitted_between(SINCE, UNTIL) == len(history.jobs)
        monkeypatch.setattr(history_module, "MAX_WINDOW_JOBS", len(history.jobs) - 1)
        with pytest.raises(InvalidInputError) as refusal:
            read_history(store, Window(SINCE, UNTIL))
    message = str(refusal.value)
    assert f"{len(history.jobs)} jobs were submitted" in message
    assert f"at most {len(history.jobs) - 1}" in message and "shorter window" in message
