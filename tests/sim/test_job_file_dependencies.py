"""A scenario's ``job`` file brings its own dependencies (``spec.afterOk`` …), as it does on
the server, beside the submission's ``after_*`` keys."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sim.conftest import WriteScenario, first, submit
from topoq.domain.errors import InvalidInputError
from topoq.sim import load_scenario, run_scenario

JOB_FILE = """\
apiVersion: topoq.io/v1
kind: Job
metadata: {name: train}
spec:
  afterOk: [prep]
  podSets: [{name: w, count: 1, requests: {nvidia.com/gpu: 8}}]
"""


def test_a_job_files_dependencies_hold_the_job_until_its_upstream_job_succeeded(
    tmp_path: Path, write_scenario: WriteScenario
) -> None:
    (tmp_path / "train.yaml").write_text(JOB_FILE, encoding="utf-8")
    train = {"id": "train", "team": "nlp", "runtime_s": 10, "job": "train.yaml"}
    path = write_scenario(
        [{"at": 0, "submit": submit("prep", runtime_s=100)}, {"at": 0, "submit": train}]
    )
    log = run_scenario(path).log
    assert first(log, "start", "train").t == 100


def test_a_job_files_unknown_upstream_id_is_the_scenarios_error(
    tmp_path: Path, write_scenario: WriteScenario
) -> None:
    (tmp_path / "train.yaml").write_text(JOB_FILE, encoding="utf-8")
    job = {"id": "t", "team": "nlp", "runtime_s": 1, "job": "train.yaml"}
    path = write_scenario([{"at": 0, "submit": job}])
    with pytest.raises(InvalidInputError) as raised:
        load_scenario(path)
    assert "'prep'" in str(raised.value) and "events[0].submit" in str(raised.value)
