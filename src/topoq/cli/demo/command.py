"""``topoq demo``: start a real server on the demo cluster, play the story, say where to look,
and stop everything (or keep the server up with ``--keep-running`` until Ctrl-C).

Exit codes: 0 when every scene showed what it should, 1 when one did not (or the server would
not start), 2 for bad options, 130 when interrupted."""

from __future__ import annotations

import shlex
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path
from types import FrameType
from typing import NoReturn

from rich.console import Console

from topoq.cli.console import make_console
from topoq.cli.demo.server import DemoServer, DemoServerError
from topoq.cli.demo.stage import DEFAULT_PACE, QUICK_PACE, SceneStopped, Stage
from topoq.cli.demo.story import SCENES, Scene, StoryState
from topoq.client import ClientError, TopoqClient
from topoq.domain.errors import InvalidInputError
from topoq.executors.local.processes import free_port

EXIT_MISSED = 1
EXIT_INTERRUPTED = 130
CLIENT_TIMEOUT_S = 10.0
DEMO_FILES = files("topoq") / "data" / "demo"


@dataclass(frozen=True)
class DemoOptions:
    quick: bool = False
    keep_running: bool = False
    data_dir: Path | None = None
    """Default: a new temporary directory, removed at the end."""
    port: int | None = None
    """Default: a free port."""
    executor: str = "local"
    """``local`` (each pod a process here), ``kubernetes`` (each pod a Pod) or ``slurm`` (each
    gang a Slurm job)."""
    kubeconfig: Path | None = None
    """With ``kubernetes``: the cluster; default: a test bed of 64 KWOK nodes brought up for
    the demo (``TOPOQ_K8S_ASSETS``) and stopped after it."""


DEMO_BED_SHAPE = (2, 4, 8)
"""The demo cluster's shape (``data/demo/cluster.yaml``): 2 spines × 4 blocks × 8 nodes."""
DEMO_SLURM_SHAPE = {"leaves": 8, "nodes_per_leaf": 8, "leaves_per_spine": 4}
"""The Slurm bed shaped as the demo cluster: 8 leaf switches (blocks) of 8, 4 to a spine."""
EXECUTORS = ("local", "kubernetes", "slurm")


def run_demo(options: DemoOptions) -> int:
    """Play the demo; returns the exit code."""
    console = make_console()
    started = time.monotonic()
    with ExitStack() as stack, _sigterm_as_exit():
        if options.executor not in EXECUTORS:
            raise InvalidInputError(
                f"no executor {options.executor!r}",
                where="--executor",
                hint=f"give {', '.join(EXECUTORS[:-1])} or {EXECUTORS[-1]}",
            )
        data_dir = _data_dir(options.data_dir, stack)
        cluster = stack.enter_context(as_file(DEMO_FILES / "cluster.yaml"))
        policy = stack.enter_context(as_file(DEMO_FILES / "policy.yaml"))
        kubeconfig, slurm_conf = options.kubeconfig, None
        if options.executor == "kubernetes" and kubeconfig is None:
            kubeconfig = _demo_bed(console, data_dir / "bed", stack)
        if options.executor == "slurm":
            slurm_conf = _demo_slurm_bed(console, data_dir / "slurm", cluster, stack)
        port = options.port or free_port()
        server = DemoServer(data_dir, port, cluster, policy, kubeconfig, slurm_conf)
        stack.callback(_stop, console, server)
        try:
            code = _play(console, server, options, started)
        except KeyboardInterrupt:
            console.print("\ninterrupted: stopping the demo server and its pods")
            code = EXIT_INTERRUPTED
        except DemoServerError as error:
            console.print(f"error: {error}", markup=False)
            code = EXIT_MISSED
    return code


def _demo_bed(console: Console, directory: Path, stack: ExitStack) -> Path:
    """A test bed shaped as the demo cluster, stopped (by PID) when the demo ends."""
    from topoq.testbeds.kubernetes import (
        BedShape,
        bring_up,
        tear_down,
    )

    console.print(
        "Bringing up a Kubernetes control plane with 64 KWOK nodes (2 spines × 4 blocks × 8)…"
    )
    shape = BedShape(64, 2, domains=DEMO_BED_SHAPE)
    bed = bring_up(directory, shape, ports="free")
    stack.callback(tear_down, directory)
    return bed.kubeconfig


def _demo_slurm_bed(console: Console, directory: Path, cluster: Path, stack: ExitStack) -> Path:
    """A real Slurm cluster of the demo cluster's 64 nodes (named as its file names them), its
    jobs cancelled and its daemons stopped (by PID) when the demo ends; its slurm.conf."""
    from topoq.discovery.sources import load_cluster
    from topoq.testbeds.slurm import SlurmShape, bring_up, tear_down

    names = tuple(node.name for node in load_cluster(cluster).nodes)
    shape = SlurmShape(**DEMO_SLURM_SHAPE, names=names)
    console.print(
        f"Bringing up a Slurm cluster of {len(names)} nodes (slurmctld and one slurmd per "
        "node, 8 fake GPUs each)…"
    )
    stack.callback(tear_down, directory)
    return bring_up(directory, shape).slurm_conf


def _play(console: Console, server: DemoServer, options: DemoOptions, started: float) -> int:
    pace = QUICK_PACE if options.quick else DEFAULT_PACE
    _introduce(console, server)
    server.start()
    _print_where_to_look(console, server)
    with TopoqClient(server.url, server.token(), timeout_s=CLIENT_TIMEOUT_S) as client:
        stage = Stage(client, console, pace, pods_print=server.kubeconfig is None)
        stage.pause()
        missed = play_scenes(stage)
    console.rule("the end")
    if not server.alive():
        tail = server.log_tail()
        console.print(
            f"The server exited during the story; its log ends:\n{tail}",
            markup=False,
            soft_wrap=True,
        )
    elapsed_s = time.monotonic() - started
    if missed:
        shown = len(SCENES) - len(missed)
        console.print(
            f"{shown} of {len(SCENES)} scenes showed what they should; scene "
            f"{', '.join(map(str, missed))} did not (see ✗ above) ({elapsed_s:.0f} s)."
        )
    else:
        console.print(f"All {len(SCENES)} scenes showed what they should ({elapsed_s:.0f} s).")
    if options.keep_running:
        _keep_running(console, server)
    return EXIT_MISSED if missed else 0


def play_scenes(stage: Stage, scenes: Sequence[Scene] = SCENES) -> list[int]:
    """Play every scene, whatever happens in one; the numbers of those that missed something."""
    state = StoryState()
    missed: list[int] = []
    for number, scene in enumerate(scenes, start=1):
        stage.console.rule(f"Scene {number}/{len(scenes)} · {scene.title}")
        stage.say(scene.summary, style="bold")
        stage.misses.clear()
        try:
            scene.play(stage, state)
        except SceneStopped:
            pass  # the stage said what it missed
        except ClientError as error:
            stage.miss(f"the scene stopped: {error}")
        except Exception as error:  # the demo reports any failure in a line and goes on
            stage.miss(f"the scene stopped on {type(error).__name__}: {error}")
        if stage.misses:
            missed.append(number)
            stage.say(f"✗ scene {number} did not show everything it should", style="bold red")
        else:
            stage.say(f"✓ scene {number}: {scene.title.lower()} shown", style="bold green")
        stage.pause()
    return missed


def _introduce(console: Console, server: DemoServer) -> None:
    console.rule("topoq demo")
    for line in (
        f"A real topoq server on {_cluster_kind(server)} of 2 spines × 4 blocks × 8 nodes × 8 "
        "GPUs (512 GPUs), with three teams:",
        "  nlp and vision are guaranteed 192 GPUs each and lend and borrow; speech is "
        "guaranteed 128 and only lends.",
        "  Priority classes inference > training > experiment; borrowed GPUs are shared by "
        "fair share.",
        _where_pods_run(server),
        f"Cluster: {server.cluster_file if server.kubeconfig is None else server.kubeconfig}",
        f"Policy:  {server.policy_file}",
        "Starting the server…",
    ):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _cluster_kind(server: DemoServer) -> str:
    if server.slurm_conf is not None:
        return "a real Slurm cluster"
    if server.kubeconfig is not None:
        return "a Kubernetes cluster"
    return "a virtual cluster"


def _where_pods_run(server: DemoServer) -> str:
    if server.kubeconfig is not None:
        return (
            f"Every pod is a Pod on the Kubernetes cluster of {server.kubeconfig}, bound to the "
            "node topoq placed it on."
        )
    if server.slurm_conf is not None:
        return (
            "Every gang is a Slurm job pinned to the nodes topoq placed it on (Slurm's "
            f"topology.conf written from the demo cluster's blocks), on {server.slurm_conf}; "
            "each pod is a task that prints its rank and topology, then sleeps."
        )
    return (
        "Every pod is a real process on this machine that prints its rank and topology, then "
        "sleeps."
    )


def _print_where_to_look(console: Console, server: DemoServer) -> None:
    program, token_file = _program(), shlex.quote(str(server.token_path))
    lines = [
        f"Dashboard: {server.url}/   (sign in with the admin token: the contents of "
        f"{server.token_path})",
        f"API:     {server.url}/api/v1   (OpenAPI: {server.url}/docs)",
        f"Token:   {server.token_path}   (admin)",
        f"Logs:    {server.log_path}; each pod's output under {server.pods_dir}/"
        if server.kubeconfig is None
        else f"Logs:    {server.log_path}",
        "Try, in another terminal, while it runs:",
        f"  export TOPOQ_SERVER={server.url} TOPOQ_TOKEN_FILE={token_file}",
    ]
    if server.slurm_conf is not None:
        conf = shlex.quote(str(server.slurm_conf))
        lines.append(f"  SLURM_CONF={conf} squeue  # the gangs as Slurm jobs")
        lines.append(f"  SLURM_CONF={conf} scontrol show topology  # the blocks topoq wrote")
    if server.kubeconfig is not None:
        kubeconfig = shlex.quote(str(server.kubeconfig))
        kubectl = shutil.which("kubectl") or "$TOPOQ_K8S_ASSETS/bin/kubectl"
        lines.append(f"  {kubectl} --kubeconfig {kubeconfig} get pods -A -o wide  # the placement")
    pods_print = server.kubeconfig is None
    for command, meaning in (
        ("list", "jobs, phases, and why pending ones wait"),
        ("queue", "the waiting jobs in the order their turns come"),
        ("explain vision-pretrain", "why a job waits, with the numbers"),
        *([("logs nlp-train-1", "what a job's pods print: rank and topology")] * pods_print),
        ("teams", "guarantee, used, borrowed and lent GPUs per team"),
        ("nodes", "node health and the jobs on each node"),
        ("events", "phase changes, newest first"),
    ):
        lines.append(f"  {program} {command:<24} # {meaning}")
    lines.append(f'  (or give each command --server {server.url} --token "$(cat {token_file})")')
    for line in lines:
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def _program() -> str:
    """How the user called topoq (``.venv/bin/topoq`` before activating the venv)."""
    called = Path(sys.argv[0]) if sys.argv and sys.argv[0] else Path("topoq")
    return shlex.quote(str(called)) if called.name == "topoq" else "topoq"


def _keep_running(console: Console, server: DemoServer) -> None:
    _print_where_to_look(console, server)
    console.print("The server keeps running; press Ctrl-C to stop it and its pods.")
    try:
        code = server.wait()
        console.print(f"the server exited by itself (exit code {code})")
    except KeyboardInterrupt:
        console.print()


def _stop(console: Console, server: DemoServer) -> None:
    """Stop the server if it runs, and in any case every pod it left behind."""
    if server.alive():
        console.print("Stopping the server and its pods…", end=" ")
        left_behind = server.stop()
        console.print("done.")
    else:
        left_behind = server.stop()
    if left_behind:
        console.print(f"Killed {len(left_behind)} pod process(es) the server left behind.")


def _data_dir(chosen: Path | None, stack: ExitStack) -> Path:
    if chosen is None:
        made = Path(tempfile.mkdtemp(prefix="topoq-demo-"))
        stack.callback(shutil.rmtree, made, ignore_errors=True)
        return made
    if chosen.exists() and (not chosen.is_dir() or any(chosen.iterdir())):
        raise InvalidInputError(
            "the demo needs a new or empty data directory",
            where=str(chosen),
            hint="give another --data-dir, or leave it out for a temporary one",
        )
    chosen.mkdir(parents=True, exist_ok=True)
    return chosen


@contextmanager
def _sigterm_as_exit() -> Iterator[None]:
    """A SIGTERM (a CI timeout, `kill`) unwinds like Ctrl-C, so the server is stopped too."""

    def interrupt(signum: int, frame: FrameType | None) -> NoReturn:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
