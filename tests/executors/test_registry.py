"""Executors are found by name; a wrong name or option says what is known."""

from __future__ import annotations

from pathlib import Path

import pytest

from topoq.domain.errors import InvalidInputError
from topoq.executors import EXECUTORS, LocalExecutor, make_executor


def test_the_local_executor_is_registered(tmp_path: Path) -> None:
    assert "local" in EXECUTORS
    executor = make_executor("local", work_dir=tmp_path)
    try:
        assert isinstance(executor, LocalExecutor)
        assert executor.capabilities.name == "local"
        assert executor.capabilities.runs_real_processes
        assert executor.capabilities.can_fail_nodes
        assert executor.capabilities.captures_logs
    finally:
        executor.close()


def test_an_unknown_executor_is_refused_with_the_known_names() -> None:
    with pytest.raises(InvalidInputError, match=r"no executor is called 'ray'.*known.*local"):
        make_executor("ray")


def test_slurm_is_registered_and_refuses_to_start_without_slurms_commands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "slurm" in EXECUTORS
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch, squeue, … here
    with pytest.raises(InvalidInputError, match=r"needs Slurm's commands .*sbatch"):
        make_executor("slurm", work_dir=tmp_path)


def test_wrong_options_are_refused_with_the_options_it_takes() -> None:
    with pytest.raises(InvalidInputError, match=r"required: work_dir; optional: clock"):
        make_executor("local", workdir="/tmp")
