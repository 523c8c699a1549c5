"""Scenario files for the simulator tests: the shipped examples, and small ones written here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from topoq.sim import LogEntry

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "examples" / "scenarios"
CLUSTER = SCENARIOS / "cluster.yaml"
POLICY = SCENARIOS / "policy.yaml"

WriteScenario = Callable[..., Path]


@pytest.fixture
def write_scenario(tmp_path: Path) -> WriteScenario:
    """``write_scenario(events, **fields)``: a scenario on the example cluster and policy."""

    def write(events: Sequence[dict[str, Any]], name: str = "scenario", **fields: Any) -> Path:
        document = {
            "apiVersion": "topoq.io/v1",
            "kind": "Scenario",
            "metadata": {"name": name},
            "cluster": str(CLUSTER),
            "policy": str(POLICY),
            **fields,
            "events": list(events),
        }
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
        return path

    return write


def entries(log: Sequence[LogEntry], decision: str, job: str | None = None) -> list[LogEntry]:
    return [e for e in log if e.decision == decision and (job is None or e.job == job)]


def first(log: Sequence[LogEntry], decision: str, job: str) -> LogEntry:
    found = entries(log, decision, job)
    assert found, f"no {decision} entry for {job}"
    return found[0]


def submit(job_id: str, team: str = "nlp", **fields: Any) -> dict[str, Any]:
    """A 1-node, 8-GPU job of 600 s unless ``fields`` say otherwise."""
    return {"id": job_id, "team": team, "runtime_s": 600, "pods": 1, "gpus": 8, **fields}
