"""The ``topoq policy`` command bodies, run in-process (the app's Typer wiring is tested with
the app)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import typer
import yaml

from topoq.cli.policy_commands import (
    run_policy_convert,
    run_policy_lint,
    run_policy_show,
    typical_gang_files,
)
from topoq.discovery.policy import load_policy, policy_from_document
from topoq.discovery.policy_hyperpod import load_hyperpod_policy
from topoq.domain.errors import InvalidInputError

ROOT = Path(__file__).resolve().parents[2]
POLICY = ROOT / "examples" / "policies" / "policy.yaml"
HYPERPOD = ROOT / "examples" / "policies" / "hyperpod"
SCHEDULER_CONFIG = HYPERPOD / "scheduler-config.json"
QUOTAS = sorted(HYPERPOD.glob("quota-*.json"))
WORKLOADS = ROOT / "examples" / "workloads"


def test_lint_of_a_clean_policy_prints_the_summary_and_returns(
    capsys: pytest.CaptureFixture[str],
) -> None:
    run_policy_lint(POLICY, None, [], None, None, None, "table")

    assert "the policy is clean: 3 teams on 64 nodes" in capsys.readouterr().out


def test_lint_errors_are_printed_and_exit_1(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    document = yaml.safe_load(POLICY.read_text())
    document["teams"][0]["quotas"][0]["instances"] = 60
    crowded = tmp_path / "crowded.yaml"
    crowded.write_text(yaml.safe_dump(document))

    with pytest.raises(typer.Exit) as exited:
        run_policy_lint(crowded, None, [], None, None, None, "json")

    assert exited.value.exit_code == 1
    report = json.loads(capsys.readouterr().out)
    assert report["valid"] is False
    assert [f["code"] for f in report["findings"]] == ["GUARANTEES_EXCEED_CAPACITY"]


def test_lint_takes_typical_gangs_per_team(capsys: pytest.CaptureFixture[str]) -> None:
    gang = f"nlp={WORKLOADS / 'unconstrained.yaml'}"

    run_policy_lint(None, SCHEDULER_CONFIG, QUOTAS, None, None, None, "json", [gang])

    assert json.loads(capsys.readouterr().out)["findings"] == []


@pytest.mark.parametrize("entry", ["nlp", "=file.yaml", "nlp="])
def test_a_gang_must_be_team_equals_file(entry: str) -> None:
    with pytest.raises(InvalidInputError, match="--gang: cannot read"):
        typical_gang_files([entry])


def test_a_gang_names_a_team_by_the_team_name_rule() -> None:
    with pytest.raises(InvalidInputError, match="--gang: 'NLP' is not a valid team name"):
        typical_gang_files([f"NLP={ROOT / 'examples' / 'workloads' / 'required-block.yaml'}"])


def test_a_policy_comes_from_exactly_one_source() -> None:
    with pytest.raises(InvalidInputError, match="both --policy and HyperPod"):
        run_policy_show(POLICY, SCHEDULER_CONFIG, [], "table")
    with pytest.raises(InvalidInputError, match="no policy given"):
        run_policy_show(None, None, [], "table")


def test_show_as_yaml_reads_back_as_the_same_policy(capsys: pytest.CaptureFixture[str]) -> None:
    run_policy_show(POLICY, None, [], "yaml")

    document = yaml.safe_load(capsys.readouterr().out)
    assert policy_from_document(document, source="shown") == load_policy(POLICY)
    assert document["metadata"]["name"] == "policy"


def test_show_as_a_table_lists_every_team(capsys: pytest.CaptureFixture[str]) -> None:
    run_policy_show(None, SCHEDULER_CONFIG, QUOTAS, "table")

    out = capsys.readouterr().out
    assert all(team in out for team in ("nlp", "vision", "serving"))
    assert "192 GPU" in out


def test_convert_writes_a_policy_file_with_the_hyperpod_meaning(tmp_path: Path) -> None:
    out = tmp_path / "converted.yaml"

    run_policy_convert(SCHEDULER_CONFIG, QUOTAS, out, name="prod")

    assert load_policy(out) == load_hyperpod_policy(SCHEDULER_CONFIG, QUOTAS)


def test_convert_needs_hyperpod_files() -> None:
    with pytest.raises(InvalidInputError, match="no HyperPod files"):
        run_policy_convert(None, [], None)


def policy_of(teams: int, path: Path) -> Path:
    entries = [
        {"name": f"team-{index}", "quotas": [{"flavor": "ml.p5.48xlarge", "instances": 1}]}
        for index in range(teams)
    ]
    path.write_text(json.dumps({"apiVersion": "topoq.io/v1", "kind": "Policy", "teams": entries}))
    return path


@pytest.mark.parametrize("output", ["table", "yaml", "json"])
def test_show_at_the_team_limit_answers_well_under_a_second(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: str
) -> None:
    policy = policy_of(1000, tmp_path / "big.json")
    started = time.thread_time()
    run_policy_show(policy, None, [], output)
    assert time.thread_time() - started < 2  # 0.2 s on an idle machine; 20,000 teams took minutes
    assert "team-999" in capsys.readouterr().out


def test_lint_at_the_team_limit_answers_well_under_a_second(tmp_path: Path) -> None:
    policy = policy_of(1000, tmp_path / "big.json")
    started = time.thread_time()
    with pytest.raises(typer.Exit):  # 1,000 guarantees of a p5 each: more than the example has
        run_policy_lint(policy, None, [], None, None, None, "json", [], None)
    assert time.thread_time() - started < 2  # 0.2 s on an idle machine; 20,000 teams took minutes


def test_a_policy_over_the_team_limit_is_refused_at_once(tmp_path: Path) -> None:
    policy = policy_of(20_000, tmp_path / "huge.json")
    started = time.thread_time()
    with pytest.raises(InvalidInputError, match="20,000 teams"):
        run_policy_show(policy, None, [], "table")
    assert time.thread_time() - started < 1


COHORT_POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
teams:
- {name: nlp, cohort: [org, lang], quotas: [{flavor: p5.48xlarge, instances: 1}]}
cohorts:
- name: lang
  parent: org
  quotas: [{flavor: p5.48xlarge, resources: {nvidia.com/gpu: 8}}]
  absoluteBorrowLimits: {p5.48xlarge: {nvidia.com/gpu: 16}}
"""


def test_show_as_a_table_lists_declared_cohorts_with_their_limits(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "cohorts.yaml"
    path.write_text(COHORT_POLICY)
    run_policy_show(path, None, [], "table")

    out = capsys.readouterr().out
    assert "org/lang/nlp" in out
    row = next(line for line in out.splitlines() if line.startswith("org/lang "))
    assert row.split()[1:] == ["1", "p5.48xlarge", "8", "GPU", "16", "GPU", "no", "limit"]
