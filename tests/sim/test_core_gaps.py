"""Governance behaviour seen over time through the simulator, found missing once and fixed:
a gang at the head of its queue is not starved by its team's smaller jobs, and reclaim evicts
no more than was borrowed."""

from __future__ import annotations

from tests.sim.conftest import SCENARIOS, WriteScenario, entries, first, submit
from topoq.sim import run_scenario

BLOCK = "topology.k8s.aws/network-node-layer-2"


def test_a_gang_at_the_head_of_its_queue_is_not_starved_by_the_teams_smaller_jobs() -> None:
    log = run_scenario(SCENARIOS / "starving-gang.yaml").log
    start = first(log, "start", "big-gang").t
    # the last warm job of l2-01-01 ends at t=1500; smaller jobs may backfill only where they
    # do not delay the gang — neither on the held block nor out of the quota it waits for
    assert start <= 1500
    small_in_held_block = [
        e
        for e in entries(log, "admit")
        if (e.job or "").startswith("small") and e.t < start and e.placement[BLOCK] == ("l2-01-01",)
    ]
    assert small_in_held_block == []


def test_reclaim_evicts_no_more_than_the_borrower_borrowed(write_scenario: WriteScenario) -> None:
    stream = {"team": "vision", "id_prefix": "vision", "every_s": 60, "count": 3, "batch": 3}
    path = write_scenario(
        [
            {"at": 0, "submit": submit("speech-asr", team="speech", pods=4, runtime_s=7200)},
            {"at": 0, "submit": submit("vision-base", team="vision", pods=4, runtime_s=7200)},
            # nlp: 48 GPUs inside its guarantee and 16 borrowed from vision
            {
                "at": 0,
                "stream": {
                    "team": "nlp",
                    "id_prefix": "nlp",
                    "every_s": 60,
                    "count": 8,
                    "batch": 8,
                    "runtime_s": 7200,
                    "gpus": 8,
                },
            },
            # vision asks for 24 GPUs; only 16 are left inside its 48-GPU guarantee
            {"at": 600, "stream": {**stream, "runtime_s": 600, "gpus": 8, "required": BLOCK}},
        ]
    )
    log = run_scenario(path).log
    reclaims = [e for e in entries(log, "preempt") if e.reason == "PREEMPTED_FOR_RECLAIM"]
    assert len(reclaims) == 2
