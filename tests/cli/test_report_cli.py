"""`topoq report usage` and `topoq topology live`: their tables and trees, and the verbs
against a real server process."""

from __future__ import annotations

import json
import time
from datetime import date
from pathlib import Path

import pytest
from rich.console import Console

from tests.cli.test_server_cli import JOB_FILE, server, topoq
from topoq.cli.server_commands import (
    duration,
    job_usage_table,
    topology_tree,
    usage_table,
    usage_title,
)
from topoq.wire.v1 import (
    JobUsageModel,
    TeamDayUsageModel,
    TopologyDomainModel,
    TopologyModel,
    UsageReportModel,
)

__all__ = ["server"]  # the real server of the server-verb tests, one per module

MAY_1 = 1_714_521_600.0


def rendered(renderable: object) -> str:
    console = Console(record=True, width=120, highlight=False)
    console.print(renderable)
    return console.export_text()


REPORT = UsageReportModel(
    start=MAY_1,
    end=MAY_1 + 2 * 86400,
    teams=["nlp"],
    days=[
        TeamDayUsageModel(
            team="nlp",
            day=date(2024, 5, 1),
            gpu_hours_in_guarantee=32.0,
            gpu_hours_borrowed=8.0,
            jobs=1,
            preemptions=1,
        )
    ],
    jobs=[
        JobUsageModel(
            job="p",
            team="nlp",
            gpu_hours=40.0,
            gpu_hours_borrowed=8.0,
            wall_time_s=9000.0,
            attempts=2,
        )
    ],
)


def test_the_usage_tables_show_each_day_and_job() -> None:
    assert usage_title(REPORT) == "GPU usage of team nlp, 2024-05-01 to 2024-05-03"
    days = rendered(usage_table(REPORT)).splitlines()
    assert days[0].split() == [
        "TEAM",
        "DAY",
        "GPU-H",
        "IN",
        "GUARANTEE",
        "GPU-H",
        "BORROWED",
        "JOBS",
        "PREEMPTIONS",
    ]
    assert days[1].split() == ["nlp", "2024-05-01", "32.00", "8.00", "1", "1"]
    jobs = rendered(job_usage_table(REPORT)).splitlines()
    assert jobs[1].split() == ["p", "nlp", "40.00", "8.00", "2h30m", "2"]


@pytest.mark.parametrize(
    ("seconds", "shown"), [(0, "0s"), (59.6, "1m00s"), (450, "7m30s"), (7500, "2h05m")]
)
def test_durations_read_as_hours_and_minutes(seconds: float, shown: str) -> None:
    assert duration(seconds) == shown


def test_the_live_tree_shows_free_and_used_gpus_to_the_depth_asked() -> None:
    leaf = TopologyDomainModel(
        name="s1/b1",
        level="topology.k8s.aws/network-node-layer-2",
        value="b1",
        nodes=2,
        gpus=16,
        gpus_used=8,
        gpus_free=8,
    )
    spine = TopologyDomainModel(
        name="s1",
        level="topology.k8s.aws/network-node-layer-1",
        value="s1",
        nodes=2,
        gpus=16,
        gpus_used=8,
        gpus_free=8,
        children=[leaf],
    )
    topology = TopologyModel(
        name="lab",
        levels=[spine.level, leaf.level],
        gpus=16,
        gpus_used=8,
        gpus_free=8,
        domains=[spine],
        outside=[],
    )
    full = rendered(topology_tree(topology, depth=2))
    assert "lab: 8/16 GPUs free, 8 used" in full
    assert "b1  network-node-layer-2  8/16 GPUs free, 8 used  (2 nodes)" in full
    assert "b1" not in rendered(topology_tree(topology, depth=1))


def test_report_usage_and_topology_live_against_a_server(
    server: dict[str, str], tmp_path: Path
) -> None:
    job_file = tmp_path / "job.yaml"
    job_file.write_text(JOB_FILE.replace("cli-block", "reported"))
    assert topoq(server, "submit", job_file).returncode == 0
    deadline = time.monotonic() + 30
    while "succeeded" not in (listing := topoq(server, "list", "--team", "nlp")).stdout:
        assert time.monotonic() < deadline, listing.stdout
        time.sleep(0.5)
    answer = topoq(server, "report", "usage", "--json")
    assert answer.returncode == 0, answer.stderr
    report = json.loads(answer.stdout)
    [job] = [job for job in report["jobs"] if job["job"] == "reported"]
    assert job["attempts"] == 1 and job["gpuHours"] == pytest.approx(
        16 * job["wallTimeS"] / 3600, abs=1e-6
    )
    assert [day["team"] for day in report["days"]] == ["nlp"]
    table = topoq(server, "report", "usage", "--team", "nlp", "--jobs")
    assert "GPU-H IN GUARANTEE" in table.stdout and "reported" in table.stdout
    bad = topoq(server, "report", "usage", "--from", "yesterday")
    assert bad.returncode == 2 and "query.from" in bad.stderr
    tree = topoq(server, "topology", "live", "--depth", "1")
    assert tree.returncode == 0 and "GPUs free" in tree.stdout
    assert json.loads(topoq(server, "topology", "live", "--json").stdout)["gpus"] == 64
