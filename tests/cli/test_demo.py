"""`topoq demo`: the README's main command. The quick story runs as a real process against a
real server with real pods; the scene runner's failure handling is checked without a server."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import cast

import pytest
from rich.console import Console

from topoq.cli.demo.command import play_scenes
from topoq.cli.demo.stage import QUICK_PACE, Stage
from topoq.cli.demo.story import Scene, StoryState
from topoq.client import ClientError, TopoqClient

ROOT = Path(__file__).resolve().parents[2]
QUICK_LIMIT_S = 60  # the quick demo takes about 20 s; the margin is for a loaded CI machine


def topoq_demo(*args: str | Path, timeout_s: float = 180) -> subprocess.CompletedProcess[str]:
    """Run `topoq demo`; past the timeout it gets SIGTERM, which stops its server too."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TOPOQ_")}
    command = [sys.executable, "-m", "topoq", "demo", *map(str, args)]
    with subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env=environment,
    ) as process:  # fmt: skip
        try:
            out, err = process.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            process.terminate()
            out, err = process.communicate(timeout=60)
            pytest.fail(f"the demo took over {timeout_s:g} s:\n{out}\n{err}")
    return subprocess.CompletedProcess(command, process.returncode, out, err)


def processes_using(directory: Path) -> list[str]:
    """Live processes started from, or running inside, ``directory`` (the server, its pods)."""
    found = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if str(directory) in command or cwd.startswith(str(directory)):
            found.append(f"{entry.name}: {command}")
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds leftover processes in /proc")
def test_quick_demo_shows_every_scene_with_its_evidence_and_leaves_nothing_running(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "demo"
    started = time.monotonic()
    run = topoq_demo("--quick", "--data-dir", data_dir)
    elapsed_s = time.monotonic() - started
    out = run.stdout
    assert run.returncode == 0, out + run.stderr
    assert "Traceback" not in out + run.stderr
    for number in range(1, 6):
        assert f"Scene {number}/5" in out and f"✓ scene {number}:" in out, out
    # where to look
    assert "/api/v1" in out and f"TOPOQ_TOKEN_FILE={data_dir / 'admin-token'}" in out
    assert "Dashboard: http://127.0.0.1:" in out and "sign in with the admin token" in out
    assert "explain vision-pretrain" in out and "logs nlp-train-1" in out
    # 1 borrowing: nlp beyond its 192-GPU guarantee on what vision lends
    assert "nlp uses 384 GPUs: its 192 and 192 borrowed" in out
    # 2 reclaim, and why the victim now waits
    assert "preempting — PREEMPTED_FOR_RECLAIM: evicted so that vision-train" in out
    assert "pending — NO_LENDER_HAS_ROOM" in out
    # 3 priority inside nlp
    assert "preempting — PREEMPTED_FOR_PRIORITY: evicted so that nlp-serve (team nlp)" in out
    # 4 the gang waits with its block held, small jobs go elsewhere, then it starts there
    assert "vision-pretrain: pending — TOPOLOGY_UNSATISFIABLE" in out
    assert "holding l1-01/l2-01-01 for it" in out
    assert "runs as one gang in l1-01/l2-01-01 (p5-0001…p5-0008) — the block that was held" in out
    assert "nlp-eval-1 ran in l1-" in out and "ran in l1-01/l2-01-01" not in out
    # 5 the node fails, the gang is requeued and restarts elsewhere, the node recovers
    assert "pending — node p5-0003 was lost; the gang is requeued" in out
    assert "— no longer in l1-01/l2-01-01" in out and "pod 0: job vision-pretrain attempt 2" in out
    assert "p5-0003: ready again" in out
    assert "All 5 scenes showed what they should" in out
    assert elapsed_s < QUICK_LIMIT_S
    assert processes_using(data_dir) == []


def test_demo_refuses_a_data_dir_that_holds_something(tmp_path: Path) -> None:
    (tmp_path / "jobs.db").write_text("mine")
    run = topoq_demo("--quick", "--data-dir", tmp_path)
    assert run.returncode == 2
    assert run.stderr.startswith("error: ") and "new or empty data directory" in run.stderr
    assert (tmp_path / "jobs.db").read_text() == "mine"


# --- the scene runner, without a server ---------------------------------------------------
def quiet_stage(deadline_s: float = 0.3) -> tuple[Stage, io.StringIO]:
    output = io.StringIO()
    console = Console(file=output, width=120, color_system=None)
    pace = replace(QUICK_PACE, deadline_s=deadline_s)
    return Stage(cast(TopoqClient, object()), console, pace), output


def test_a_scene_that_misses_or_fails_says_so_in_a_line_and_the_story_goes_on() -> None:
    stage, output = quiet_stage()

    def shown(stage: Stage, state: StoryState) -> None:
        stage.evidence("it happened")

    def missed(stage: Stage, state: StoryState) -> None:
        stage.expect("the impossible", lambda: False)

    def unreachable(stage: Stage, state: StoryState) -> None:
        raise ClientError("cannot reach the topoq server")

    def broken(stage: Stage, state: StoryState) -> None:
        raise KeyError("gang")

    scenes = [Scene(f"scene {play.__name__}", "one line", play) for play in (shown, missed)]
    scenes += [Scene("unreachable", "one line", unreachable), Scene("broken", "x", broken)]
    assert play_scenes(stage, scenes) == [2, 3, 4]
    text = output.getvalue()
    assert "✓ scene 1" in text
    assert "✗ expected the impossible, but it did not happen within 0.3 s" in text
    assert "✗ the scene stopped: cannot reach the topoq server" in text
    assert "✗ the scene stopped on KeyError: 'gang'" in text
    assert "Traceback" not in text


def test_expect_polls_until_the_check_holds_and_tolerates_a_passing_error() -> None:
    stage, output = quiet_stage(deadline_s=5)
    answers: Iterator[ClientError | bool] = iter([ClientError("busy", status=503), False, True])

    def check() -> bool:
        answer = next(answers)
        if isinstance(answer, ClientError):
            raise answer
        return answer

    stage.expect("it to happen", check)
    assert stage.misses == [] and output.getvalue() == ""


def test_expect_stops_the_scene_at_once_when_the_server_is_unreachable() -> None:
    stage, _ = quiet_stage(deadline_s=60)

    def check() -> bool:
        raise ClientError("cannot reach the topoq server")

    started = time.monotonic()
    with pytest.raises(ClientError):
        stage.expect("it to happen", check)
    assert time.monotonic() - started < 1


def test_demo_names_the_executors_it_has_and_where_to_get_kubernetes(tmp_path: Path) -> None:
    unknown = topoq_demo("--quick", "--executor", "ray", "--data-dir", tmp_path / "a")
    assert unknown.returncode == 2 and "Traceback" not in unknown.stderr
    assert unknown.stderr.startswith("error: --executor: no executor 'ray'")
    assert "local, kubernetes or slurm" in unknown.stderr
    # without TOPOQ_K8S_ASSETS (topoq_demo clears it) and without --kubeconfig
    missing = topoq_demo("--quick", "--executor", "kubernetes", "--data-dir", tmp_path / "b")
    assert missing.returncode == 2 and "Traceback" not in missing.stderr
    assert "TOPOQ_K8S_ASSETS" in missing.stderr and "--kubeconfig" in missing.stderr
