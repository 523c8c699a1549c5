"""``topoq simulate``'s runner: the summary table, the JSON summary and the decision log."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from topoq.cli.simulate_command import duration, run_simulate
from topoq.domain.errors import InvalidInputError

SCENARIOS = Path(__file__).resolve().parents[2] / "examples" / "scenarios"
RECLAIM = SCENARIOS / "reclaim.yaml"


def test_the_table_shows_every_team_and_the_utilisation(capsys: pytest.CaptureFixture[str]) -> None:
    run_simulate(RECLAIM, None, "table")
    out = capsys.readouterr().out
    assert "Scenario reclaim: 2h00m simulated" in out
    assert "GPU utilisation 56% of 128 GPUs" in out
    rows = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert "21.3 (100%)" in rows["nlp"]
    assert "4 / 0" in rows["nlp"]
    assert "0 / 4" in rows["vision"]


def test_jsonl_prints_the_log_and_log_writes_the_same_lines(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = tmp_path / "decisions.jsonl"
    run_simulate(RECLAIM, log, "jsonl")
    printed = capsys.readouterr().out.splitlines()
    assert printed == log.read_text(encoding="utf-8").splitlines()
    preempts = [json.loads(line) for line in printed if '"preempt"' in line]
    assert {entry["reason"] for entry in preempts} == {"PREEMPTED_FOR_RECLAIM"}
    assert {entry["for"] for entry in preempts} == {"vision-train"}


def test_json_prints_the_summary_and_end_state(capsys: pytest.CaptureFixture[str]) -> None:
    run_simulate(SCENARIOS / "dependencies.yaml", None, "json")
    document = json.loads(capsys.readouterr().out)
    assert document["scenario"] == "dependencies"
    nlp = next(team for team in document["summary"]["teams"] if team["team"] == "nlp")
    assert (nlp["completed"], nlp["failed"], nlp["cancelled"]) == (6, 1, 4)
    assert document["left_pending"] == []


def test_a_bad_scenario_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("apiVersion: topoq.io/v1\nkind: Scenario\n", encoding="utf-8")
    with pytest.raises(InvalidInputError, match="cluster: is missing"):
        run_simulate(path, None, "table")


def test_durations_read_naturally() -> None:
    assert [duration(s) for s in (0, 45, 60, 750, 3600, 7500)] == [
        "0s",
        "45s",
        "1m",
        "12m30s",
        "1h00m",
        "2h05m",
    ]
