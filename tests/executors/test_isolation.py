"""Two different jobs never share a file, a directory or a process (issue 8): ids that the old
``[^A-Za-z0-9._-] → _`` scheme mapped to one folder get separate folders, logs and pid files,
and everything the executor writes is private to its user, whatever the umask."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.executors.contract import EXITED, STARTED, of
from tests.executors.launches import gang, place, poll_until, process_alive, python
from topoq.domain.job import JobId
from topoq.engine.ports import ExecutorStartFailed
from topoq.executors.local import LocalExecutor
from topoq.executors.local.layout import FILE_NAME_LIMIT_BYTES, attempt_dir, path_component

SAY_JOB_THEN_SLEEP = (
    "import os, time; print('secret of', os.environ['TOPOQ_JOB_ID'], flush=True); time.sleep(60)"
)


@pytest.fixture
def executor(tmp_path: Path) -> Iterator[LocalExecutor]:
    with LocalExecutor(tmp_path / "work", stop_grace_s=0.5) as local:
        yield local


def _started(executor: LocalExecutor, job: str) -> None:
    poll_until(executor, lambda events: STARTED in [e.kind for e in of(job, events)])
    poll_until(executor, lambda _: executor.logs(JobId(job)).count("secret of") == 2)


def test_ids_that_collided_under_the_old_scheme_get_separate_logs_and_pods(
    executor: LocalExecutor,
) -> None:
    theirs, mine = "vision:secret-run", "vision_secret-run"
    placed = place(gang(theirs, team_name="vision"), gang(mine, team_name="nlp"))
    for job in (theirs, mine):
        executor.start(placed.launch(job, command=python(SAY_JOB_THEN_SLEEP)))
        _started(executor, job)
    assert f"secret of {mine}" not in executor.logs(JobId(theirs))
    assert f"secret of {theirs}" not in executor.logs(JobId(mine))
    their_dir = attempt_dir(executor.work_dir, "vision", theirs, 1)
    my_dir = attempt_dir(executor.work_dir, "nlp", mine, 1)
    assert their_dir != my_dir and (their_dir / "pids.json").exists()
    their_pids = list(executor.pids(JobId(theirs)).values())

    executor.cancel(JobId(mine))
    assert all(process_alive(pid) for pid in their_pids)
    assert (their_dir / "pids.json").exists()
    assert f"secret of {theirs}" in executor.logs(JobId(theirs), 0)


@pytest.mark.parametrize(
    "job", ["..", ".", ".hidden", "a/b", "../../etc/passwd", "x" * 300, "é" * 200, "_2e", "nul\0"]
)
def test_every_id_names_one_folder_inside_its_team_under_the_file_name_limit(
    tmp_path: Path, job: str
) -> None:
    directory = attempt_dir(tmp_path, "team/../x", job, 7)
    relative = directory.relative_to(tmp_path).parts
    assert len(relative) == 3 and relative[2] == "7"
    for part in relative:
        assert part not in {".", ".."} and not part.startswith(".")
        assert "/" not in part and "\0" not in part
        assert len(part.encode()) <= FILE_NAME_LIMIT_BYTES
    directory.mkdir(parents=True)  # the file system takes it


@given(st.text(max_size=400), st.text(max_size=400))
def test_path_components_are_injective(first: str, second: str) -> None:
    if first != second:
        assert path_component(first) != path_component(second)
    assert path_component(first) == path_component(first)


def _modes(root: Path) -> dict[str, int]:
    found = {}
    for directory, subdirectories, files in os.walk(root):
        for name in subdirectories + files:
            path = Path(directory) / name
            found[str(path.relative_to(root))] = stat.S_IMODE(path.lstat().st_mode)
    return found


def test_everything_the_executor_writes_is_private_whatever_the_umask(tmp_path: Path) -> None:
    previous = os.umask(0)
    try:
        with LocalExecutor(tmp_path / "work", stop_grace_s=0.5) as executor:
            placed = place(gang("open", team_name="vision"), gang("typo"))
            executor.start(placed.launch("open", command=python(SAY_JOB_THEN_SLEEP)))
            _started(executor, "open")
            executor.start(placed.launch("typo", command=("/no/such/program",)))
            poll_until(executor, lambda events: any(e.job == "typo" for e in events))
            modes = _modes(tmp_path / "work")
    finally:
        os.umask(previous)
    assert stat.S_IMODE((tmp_path / "work").stat().st_mode) == 0o700
    assert any(name.endswith("pids.json") for name in modes)
    assert any(name.endswith("pods.json") for name in modes)
    assert sum(name.endswith(".log") for name in modes) == 3  # typo stopped at its pod 0
    for name, mode in modes.items():
        wanted = 0o700 if (tmp_path / "work" / name).is_dir() else 0o600
        assert mode == wanted, f"{name} is {oct(mode)}"


def test_a_job_whose_id_and_team_exceed_the_file_name_limit_runs_and_keeps_its_logs(
    executor: LocalExecutor,
) -> None:
    job, team = "j" * 300, "t" * 300
    executor.start(place(gang(job, team_name=team)).launch(job, command=python("print('long')")))
    poll_until(executor, lambda events: any(e.kind is EXITED for e in of(job, events)))
    assert executor.logs(JobId(job), 0) == "long\n"


def test_a_job_id_with_a_nul_cannot_reach_a_pods_environment_and_leaves_nothing(
    executor: LocalExecutor,
) -> None:
    job = "nul\0id"
    with pytest.raises(ExecutorStartFailed, match="could not start"):
        executor.start(place(gang(job)).launch(job, command=python("pass")))
    assert executor.pids(JobId(job)) == {} and executor.poll() == []
    assert not attempt_dir(executor.work_dir, "t", job, 1).exists()
