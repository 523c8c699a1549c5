"""Slurm's own scheduler beside topoq, placing the same job stream on one real Slurm cluster in
one run (``topoq.testbeds.slurm``).

    python -m benchmarks.slurm_peer [--jobs 200] [--leaves 8] [--nodes-per-leaf 8] [--markdown]

**Cluster**: a bed of ``--leaves`` leaf switches of ``--nodes-per-leaf`` nodes (default 8 × 8 =
64 nodes of 8 GPUs), 4 leaves to a spine, spines under a root (``topology/tree``,
``sched/backfill``, ``select/cons_tres``).

**Stream** (seeded): ``--jobs`` gangs of 1–16 whole nodes (most small, a few large), each
sleeping 3–15 s under a time limit of one minute (Slurm's unit: both schedulers backfill by
it), arriving about every ``--gap`` seconds — enough to keep the cluster busy so
that placement matters. Every gang's ideal span is the fewest leaves that hold it (one leaf up
to a leaf's nodes) under one spine.

- **Slurm**: each gang ``sbatch --nodes=N --ntasks-per-node=1 --gres=gpu:8 --exclusive
  --time=1 --switches=L@60`` at its arrival (``L`` its ideal leaves; Slurm may relax that
  after 60 s), running ``srun sleep D`` — one task per node, as a distributed job's ranks
  and as topoq's gang runs; Slurm decides where.
- **topoq**: the same bed, Slurm's own jobs gone; a real ``topoq server --executor slurm``
  with one team owning every GPU; each gang submitted through the API at its arrival, asking
  for its leaf level as *preferred* (the gang may span more when it cannot fit); topoq
  decides where and pins each gang with ``--nodelist``.

- **topoq, virtual clock**: the same stream and policy through ``topoq simulate`` (the same
  scheduling core, no executor, no controller loop): what topoq's decisions alone give.

Both real runs are read back from Slurm (``squeue --json``: each job's nodes, start and end) and
reported side by side: leaves and spines spanned per gang, the share at its ideal span, mean
and p95 wait (submission to start), makespan (first submission to last end), and GPU-hours
left idle while a gang waited. A benchmark, not a timed test: nothing here fails on a number.
"""

from __future__ import annotations

import argparse
import io
import itertools
import json
import math
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from rich import box
from rich.console import Console
from rich.table import Table

from topoq.discovery.hostlist import expand_hostlist
from topoq.sim.engine import run_scenario
from topoq.testbeds.slurm import (
    SlurmBed,
    SlurmShape,
    bring_up,
    reset,
    run_slurm,
    tear_down,
)
from topoq.testing.server import running_server

SEED = 20261206
SIZES = (1, 1, 1, 2, 2, 2, 4, 4, 8, 12, 16)
GPUS = 8
LEAVES_PER_SPINE = 4
SWITCHES_WAIT = "60"
POLICY = """\
apiVersion: topoq.io/v1
kind: Policy
metadata: {name: slurm-peer}
teams:
- name: all
  sharing: LendAndBorrow
  quotas:
  - flavor: default
    resources: {nvidia.com/gpu: %d}
"""


@dataclass(frozen=True)
class Gang:
    name: str
    nodes: int
    at_s: float
    """When it arrives, after the stream's start."""
    duration_s: float


@dataclass(frozen=True)
class Ran:
    gang: Gang
    submitted: float
    started: float
    ended: float
    nodes: tuple[str, ...]


@dataclass(frozen=True)
class Summary:
    mode: str
    gangs: int
    mean_leaves: float
    mean_spines: float
    ideal_share: float
    mean_wait_s: float
    p95_wait_s: float
    makespan_s: float
    idle_gpu_hours_waiting: float


def stream(count: int, gap_s: float, seed: int = SEED) -> list[Gang]:
    rng = random.Random(seed)
    at, gangs = 0.0, []
    for index in range(count):
        at += rng.expovariate(1 / gap_s)
        gangs.append(Gang(f"g{index:04d}", rng.choice(SIZES), at, rng.uniform(3, 15)))
    return gangs


def leaf_of(bed_nodes: list[str], per_leaf: int) -> dict[str, int]:
    return {name: index // per_leaf for index, name in enumerate(bed_nodes)}


def run_slurm_mode(bed: SlurmBed, gangs: list[Gang], per_leaf: int) -> list[Ran]:
    submitted: dict[str, float] = {}
    began = time.time()
    for gang in gangs:
        _sleep_until(began + gang.at_s)
        leaves = math.ceil(gang.nodes / per_leaf)
        run_slurm(
            bed,
            [
                "sbatch", "--parsable", f"--job-name={gang.name}", f"--nodes={gang.nodes}",
                "--ntasks-per-node=1", f"--gres=gpu:{GPUS}", "--exclusive",
                f"--switches={leaves}@{SWITCHES_WAIT}", "--output=/dev/null", "--time=1",
                f"--wrap=srun sleep {gang.duration_s:.1f}",
            ],
        )  # fmt: skip
        submitted[gang.name] = time.time()
    return _collect(bed, gangs, submitted, lambda job: str(job["name"]))


def run_topoq_mode(
    bed: SlurmBed,
    gangs: list[Gang],
    directory: Path,
    leaf_level: str,
    admitted: dict[str, float],
    steps: dict[str, float] | None = None,
    server_options: tuple[str, ...] = (),
) -> list[Ran]:
    """The stream through a real topoq server; ``admitted`` gets when topoq admitted each gang
    (to split its wait into topoq's decision and Slurm's start), ``steps`` the controller's
    step count and total duration (``topoq_cycle_duration_seconds``)."""
    directory.mkdir(parents=True, exist_ok=True)
    policy = directory / "policy.yaml"
    policy.write_text(POLICY % (len(bed.nodes) * GPUS))
    options = ["--executor", "slurm", "--slurm-conf", str(bed.slurm_conf), *server_options]
    submitted: dict[str, float] = {}
    with running_server(directory / "data", *options, policy=policy) as server:
        token = (server.data_dir / "admin-token").read_text().strip()
        http = httpx.Client(
            base_url=f"{server.url}/api/v1",
            headers={"Authorization": f"Bearer {token}"},
            timeout=30,
        )
        _wait_for(lambda: len(http.get("/nodes").json()) == len(bed.nodes), 60)
        began = time.time()
        for gang in gangs:
            _sleep_until(began + gang.at_s)
            answer = http.post("/jobs", json=_job_document(gang, leaf_level))
            if answer.status_code != 201:
                raise SystemExit(f"error: topoq refused {gang.name}: {answer.text}")
            submitted[gang.name] = time.time()
        _wait_for(lambda: _all_done(http, gangs), 1800)
        for gang in gangs:  # the last admission: a requeued gang's latest
            admitted[gang.name] = float(http.get(f"/jobs/{gang.name}").json()["admittedAt"])
        if steps is not None:
            steps.update(_step_figures(httpx.get(f"{server.url}/metrics", timeout=30).text))
    return _collect(bed, gangs, submitted, _topoq_name)


def _step_figures(metrics: str) -> dict[str, float]:
    """The controller's step count and total seconds, from its Prometheus text."""
    found: dict[str, float] = {}
    for line in metrics.splitlines():
        for name, key in (
            ("topoq_cycle_duration_seconds_count", "count"),
            ("topoq_cycle_duration_seconds_sum", "seconds"),
        ):
            if line.startswith(name + " "):
                found[key] = float(line.split()[1])
    return found


def run_simulated_mode(
    gangs: list[Gang], nodes: list[str], per_leaf: int, directory: Path
) -> list[Ran]:
    """The same stream through topoq's scheduler on a virtual clock (``topoq simulate``): the
    same core and policy, no executor, no controller loop — every gang starts the instant it
    is admitted and ends after exactly its run time. What topoq's decisions alone give."""
    directory.mkdir(parents=True, exist_ok=True)
    labels = [
        {"spine": f"s{i // (per_leaf * LEAVES_PER_SPINE)}", "leaf": f"l{i // per_leaf}"}
        for i in range(len(nodes))
    ]
    cluster = {
        "apiVersion": "topoq.io/v1",
        "kind": "Cluster",
        "metadata": {"name": "slurm-peer"},
        "levels": ["spine", "leaf", "kubernetes.io/hostname"],
        "nodes": [
            {"name": name, "labels": label, "allocatable": {"nvidia.com/gpu": GPUS}}
            for name, label in zip(nodes, labels, strict=True)
        ],
    }
    events = [
        {
            "at": gang.at_s,
            "submit": {
                "id": gang.name,
                "team": "all",
                "runtime_s": gang.duration_s,
                "time_limit": 60,
                "pods": gang.nodes,
                "gpus": GPUS,
                "preferred": "leaf",
            },
        }
        for gang in gangs
    ]
    (directory / "cluster.yaml").write_text(json.dumps(cluster))
    (directory / "policy.yaml").write_text(POLICY % (len(nodes) * GPUS))
    scenario = {
        "apiVersion": "topoq.io/v1",
        "kind": "Scenario",
        "metadata": {"name": "slurm-peer"},
        "cluster": "cluster.yaml",
        "policy": "policy.yaml",
        "events": events,
    }
    (directory / "scenario.yaml").write_text(json.dumps(scenario))
    result = run_scenario(directory / "scenario.yaml")
    by_name = {gang.name: gang for gang in gangs}
    placed = {
        str(entry.job): tuple(entry.placement.get("kubernetes.io/hostname", ()))
        for entry in result.log
        if entry.decision.value == "admit"
    }
    return [
        Ran(
            by_name[str(entry.job)],
            by_name[str(entry.job)].at_s,
            entry.t,
            entry.t + by_name[str(entry.job)].duration_s,
            placed[str(entry.job)],
        )
        for entry in result.log
        if entry.decision.value == "start" and str(entry.job) in by_name
    ]


def _topoq_name(job: dict[str, Any]) -> str:
    """The gang a Slurm job of topoq's runs ("" for another's)."""
    name = str(job["name"])
    return name.removeprefix("topoq-") if name.startswith("topoq-") else ""


def _job_document(gang: Gang, leaf_level: str) -> dict[str, Any]:
    pod_set = {
        "name": "workers",
        "count": gang.nodes,
        "requests": {"nvidia.com/gpu": GPUS},
        "command": ["sleep", f"{gang.duration_s:.1f}"],
        "topology": {"preferred": leaf_level},
    }
    return {
        "format": "topoq",
        "team": "all",
        "document": {
            "apiVersion": "topoq.io/v1",
            "kind": "Job",
            "metadata": {"name": gang.name},
            "spec": {"podSets": [pod_set], "timeLimit": "60s"},
        },
    }


def _all_done(http: httpx.Client, gangs: list[Gang]) -> bool:
    answer = http.get("/jobs", params={"limit": 1, "phase": "succeeded"})
    return answer.status_code == 200 and int(answer.json()["total"]) >= len(gangs)


def _collect(
    bed: SlurmBed, gangs: list[Gang], submitted: dict[str, float], name_of: Any
) -> list[Ran]:
    by_name = {gang.name: gang for gang in gangs}

    def finished() -> list[dict[str, Any]]:
        out = run_slurm(bed, ["squeue", "--json", "--states=all"]).stdout
        jobs = json.loads(out)["jobs"]
        return [j for j in jobs if name_of(j) in by_name]

    _wait_for(lambda: sum(j["job_state"] == "COMPLETED" for j in finished()) >= len(gangs), 1800)
    ran = []
    for job in finished():
        if job["job_state"] != "COMPLETED":
            continue
        gang = by_name[name_of(job)]
        ran.append(
            Ran(
                gang,
                submitted[gang.name],
                float(job["start_time"]),
                float(job["end_time"]),
                tuple(expand_hostlist(job["nodes"])),
            )
        )
    return ran


def summarize(mode: str, runs: list[Ran], leaf: dict[str, int], total_gpus: int) -> Summary:
    leaves = [len({leaf[n] for n in r.nodes}) for r in runs]
    spines = [len({leaf[n] // LEAVES_PER_SPINE for n in r.nodes}) for r in runs]
    per_leaf = sum(1 for n in leaf if leaf[n] == 0)
    ideal = [
        used == math.ceil(r.gang.nodes / per_leaf) and spine == 1
        for r, used, spine in zip(runs, leaves, spines, strict=True)
    ]
    waits = sorted(max(0.0, r.started - r.submitted) for r in runs)
    first = min(r.submitted for r in runs)
    return Summary(
        mode,
        len(runs),
        statistics.fmean(leaves),
        statistics.fmean(spines),
        sum(ideal) / len(runs),
        statistics.fmean(waits),
        waits[min(len(waits) - 1, math.ceil(0.95 * len(waits)) - 1)],
        max(r.ended for r in runs) - first,
        _idle_while_waiting(runs, total_gpus) / 3600,
    )


def _idle_while_waiting(runs: list[Ran], total_gpus: int) -> float:
    """GPU-seconds idle while at least one gang waited (submitted, not started)."""
    moments = sorted({t for r in runs for t in (r.submitted, r.started, r.ended)})
    idle = 0.0
    for start, end in itertools.pairwise(moments):
        middle = (start + end) / 2
        waiting = any(r.submitted <= middle < r.started for r in runs)
        if not waiting:
            continue
        used = sum(len(r.nodes) * GPUS for r in runs if r.started <= middle < r.ended)
        idle += max(0, total_gpus - used) * (end - start)
    return idle


def render(rows: list[Summary], markdown: bool) -> str:
    headers = (
        "mode", "gangs", "leaves/gang", "spines/gang", "at ideal span", "mean wait",
        "p95 wait", "makespan", "idle GPU-h while waiting",
    )  # fmt: skip
    cells = [
        (
            r.mode,
            f"{r.gangs}",
            f"{r.mean_leaves:.2f}",
            f"{r.mean_spines:.2f}",
            f"{r.ideal_share:.0%}",
            f"{r.mean_wait_s:.1f} s",
            f"{r.p95_wait_s:.1f} s",
            f"{r.makespan_s:.0f} s",
            f"{r.idle_gpu_hours_waiting:.2f}",
        )
        for r in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|---|" + "--:|" * (len(headers) - 1)]
        lines += ["| " + " | ".join(row) + " |" for row in cells]
        return "\n".join(lines) + "\n"
    table = Table(box=box.SIMPLE_HEAVY, title="Slurm's scheduler beside topoq, same stream")
    for header in headers:
        table.add_column(header, justify="left" if header == "mode" else "right")
    for row in cells:
        table.add_row(*row)
    console = Console(file=io.StringIO(), width=140)
    console.print(table)
    return console.file.getvalue()  # type: ignore[attr-defined]


def ratios(rows: list[Summary]) -> list[str]:
    found = {r.mode: r for r in rows}
    slurm, topoq = found.get("slurm"), found.get("topoq")
    if slurm is None or topoq is None:
        return []
    return [
        f"topoq against Slurm: leaves/gang {topoq.mean_leaves / slurm.mean_leaves:.2f}x, "
        f"at ideal span {topoq.ideal_share:.0%} vs {slurm.ideal_share:.0%}, mean wait "
        f"{_ratio(topoq.mean_wait_s, slurm.mean_wait_s)}, makespan "
        f"{_ratio(topoq.makespan_s, slurm.makespan_s)}, idle GPU-h while waiting "
        f"{_ratio(topoq.idle_gpu_hours_waiting, slurm.idle_gpu_hours_waiting)}"
    ]


def _ratio(mine: float, theirs: float) -> str:
    return f"{mine / theirs:.2f}x" if theirs > 0 else "-"


def _sleep_until(moment: float) -> None:
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


def _wait_for(condition: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise SystemExit(f"error: timed out after {timeout_s:.0f} s")
        time.sleep(0.5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.slurm_peer", description=__doc__)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--gap", type=float, default=0.6, help="mean seconds between arrivals")
    parser.add_argument("--leaves", type=int, default=8)
    parser.add_argument("--nodes-per-leaf", type=int, default=8)
    parser.add_argument("--markdown", action="store_true")
    parser.add_argument(
        "--step-interval", type=float, default=None, help="topoq server's --step-interval"
    )
    parser.add_argument(
        "--save", type=Path, default=None, help="also write every gang of both runs (JSON lines)"
    )
    args = parser.parse_args(argv)
    gangs = stream(args.jobs, args.gap)
    shape = SlurmShape(args.leaves, args.nodes_per_leaf, LEAVES_PER_SPINE)
    with tempfile.TemporaryDirectory(prefix="topoq-slurm-peer-") as scratch:
        directory = Path(scratch)
        bed = bring_up(directory / "bed", shape)
        try:
            leaf = leaf_of(list(bed.nodes), args.nodes_per_leaf)
            total = len(bed.nodes) * GPUS
            slurm = run_slurm_mode(bed, gangs, args.nodes_per_leaf)
            reset(bed)
            tiers = 3 if args.leaves > LEAVES_PER_SPINE else 2  # a root above several spines
            leaf_level = f"topology.topoq.io/slurm-switch-{tiers}"
            admitted: dict[str, float] = {}
            steps: dict[str, float] = {}
            step = ("--step-interval", str(args.step_interval)) if args.step_interval else ()
            topoq = run_topoq_mode(
                bed, gangs, directory / "topoq", leaf_level, admitted, steps, step
            )
        finally:
            tear_down(directory / "bed")
        simulated = run_simulated_mode(
            gangs, list(bed.nodes), args.nodes_per_leaf, directory / "simulated"
        )
    rows = [
        summarize("slurm", slurm, leaf, total),
        summarize("topoq", topoq, leaf, total),
        summarize("topoq, virtual clock", simulated, leaf, total),
    ]
    print(render(rows, args.markdown))
    for line in ratios(rows):
        print(line)
    print(wait_split(topoq, admitted))
    if steps.get("count"):
        print(
            f"topoq's controller: {steps['count']:.0f} steps, {steps['seconds']:.1f} s in all, "
            f"{1000 * steps['seconds'] / steps['count']:.0f} ms each on average"
        )
    if args.save is not None:
        save_runs(args.save, {"slurm": slurm, "topoq": topoq}, admitted)
    return 0


def save_runs(path: Path, runs: dict[str, list[Ran]], admitted: dict[str, float]) -> None:
    """Every gang of both runs as JSON lines: for a closer look at where the waits went."""
    with path.open("w") as out:
        for mode, ran in runs.items():
            for r in ran:
                row = {
                    "mode": mode,
                    "gang": r.gang.name,
                    "nodes": r.gang.nodes,
                    "duration_s": r.gang.duration_s,
                    "submitted": r.submitted,
                    "admitted": admitted.get(r.gang.name) if mode == "topoq" else None,
                    "started": r.started,
                    "ended": r.ended,
                    "placed": list(r.nodes),
                }
                out.write(json.dumps(row) + "\n")


def wait_split(runs: list[Ran], admitted: dict[str, float]) -> str:
    """Where topoq's gangs waited: submission to admission (topoq's queue) and admission to
    the Slurm job's start (the controller's step, ``sbatch`` and Slurm starting it)."""
    queued = [admitted[r.gang.name] - r.submitted for r in runs if r.gang.name in admitted]
    starting = [r.started - admitted[r.gang.name] for r in runs if r.gang.name in admitted]
    if not queued:
        return "topoq: no admission times"
    return (
        f"topoq's wait: submission to admission {statistics.fmean(queued):.1f} s mean, "
        f"admission to Slurm's start {statistics.fmean(starting):.1f} s mean "
        f"(p95 {sorted(starting)[math.ceil(0.95 * len(starting)) - 1]:.1f} s; Slurm's start "
        "times are whole seconds)"
    )


if __name__ == "__main__":
    raise SystemExit(main())
