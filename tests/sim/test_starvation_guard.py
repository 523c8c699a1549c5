"""No gang starves, and backfill never delays it — in the simulator, as a user would try it.

The issue's example: on 16 nodes, team a (guaranteed 4 nodes, may borrow 4) submits an
8-node unconstrained gang while team b (guaranteed 4 nodes, may borrow 12) borrows the rest
and keeps submitting single-node jobs. Every node that frees is idle capacity both could
borrow; without the guard b's later jobs take each one and a's gang waits until b's stream
runs dry. With the guard, once the gang has waited 600 s its quota is held against b's
borrowing, so b's later jobs wait and the gang starts as soon as enough of b's work ends.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.sim.conftest import SCENARIOS, WriteScenario, entries, first
from topoq.sim import SimulationResult, run_scenario

CLUSTER = {"generate": "2x2x4 p5.48xlarge"}
GUARD_S = 600
STREAM = 40


def issue_example(tmp_path: Path, guard: object) -> SimulationResult:
    """examples/scenarios/starving-borrower.yaml with the guard set to ``guard``."""
    document = yaml.safe_load((SCENARIOS / "starving-borrower.yaml").read_text(encoding="utf-8"))
    document["cluster"] = str(SCENARIOS / "cluster.yaml")
    document["policy"]["scheduling"]["starvationGuardS"] = guard
    path = tmp_path / "starving-borrower.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return run_scenario(path)


def test_without_the_guard_later_single_node_jobs_overtake_the_gang(tmp_path: Path) -> None:
    log = issue_example(tmp_path, 0).log
    gang_start = first(log, "start", "gang").t
    overtook = [e for e in entries(log, "start") if e.job and e.job.startswith("later")]
    assert len([e for e in overtook if e.t < gang_start]) >= STREAM - 8
    assert gang_start > 60 + 60 * (STREAM - 1), "the old behaviour: it waits out the stream"


def test_with_the_guard_the_gang_starts_within_the_guard_plus_the_drain() -> None:
    result = run_scenario(SCENARIOS / "starving-borrower.yaml")  # the guard is 10m
    log = result.log
    gang_start = first(log, "start", "gang").t
    # from t=630 b's borrowing is held back; b must fall from 12 nodes to 8, and its
    # warm jobs (ending every 60 s from t=300) and the later ones started before t=630
    # (900 s each) end by t=630 + 900
    assert gang_start <= 30 + GUARD_S + 900
    held = [e for e in entries(log, "wait") if e.reason == "RESERVED_FOR_LARGER_GANG"]
    assert held and all(e.team == "b" for e in held)
    assert any("gang" in (e.message or "") for e in held)
    assert not result.left_pending, "every job of b runs in the end"


BACKFILL_POLICY = {
    "scheduling": {"prioritization": "fifo", "starvationGuardS": 60},
    "teams": [{"name": "research", "quotas": [{"flavor": "p5.48xlarge", "instances": 16}]}],
}


def test_short_time_limited_jobs_backfill_into_held_capacity_and_others_wait(
    write_scenario: WriteScenario,
) -> None:
    """12 of 16 nodes run jobs limited to 1200 s; a 16-node gang waits and, starving at
    t=70, holds the whole cluster until t=1200, its expected start. A job limited to 10
    minutes fits before then and backfills; one limited to an hour, and one without a
    limit, would delay the gang and wait."""

    def job(job_id: str, pods: int, runtime_s: float, **fields: Any) -> dict[str, Any]:
        return {"id": job_id, "team": "research", "runtime_s": runtime_s, "pods": pods, **fields}

    warm = [{"at": 0, "submit": job(f"warm-{i:02}", 1, 1200, time_limit=1200)} for i in range(12)]
    events = [
        *warm,
        {"at": 10, "submit": job("gang", 16, 600, gpus=8)},
        {"at": 100, "submit": job("short", 1, 500, gpus=8, time_limit="10m")},
        {"at": 100, "submit": job("long", 1, 500, gpus=8, time_limit="1h")},
        {"at": 100, "submit": job("unlimited", 1, 500, gpus=8)},
    ]
    for event in warm:
        event["submit"]["gpus"] = 8
    path = write_scenario(events, name="backfill", cluster=CLUSTER, policy=BACKFILL_POLICY)
    result = run_scenario(path)
    log = result.log
    assert first(log, "start", "short").t == 100, "it ends by 700, before the gang's 1200"
    assert first(log, "start", "gang").t == 1200, "the backfilled job did not delay it"
    for late in ("long", "unlimited"):
        assert first(log, "wait", late).reason == "RESERVED_FOR_LARGER_GANG"
        assert first(log, "start", late).t >= 1200 + 600
    gang_wait = first(log, "wait", "gang")
    assert gang_wait.eta == 1200, "the gang's ETA: when the warm jobs reach their limits"
    assert result.eta_error.jobs >= 1 and result.eta_error.mean_abs_s is not None
    assert result.document()["eta_error"]["jobs"] == result.eta_error.jobs
