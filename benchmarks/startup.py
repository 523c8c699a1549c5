"""How much CPU a ``topoq`` verb costs from start to exit, today's code against a baseline
revision in the same run.

    python -m benchmarks.startup                     # every verb, 15 runs each (~1 min)
    python -m benchmarks.startup --runs 5 --baseline none
    python -m benchmarks.startup --imports           # and the 8 costliest imports per verb
    python -m benchmarks.startup --markdown

**What runs**: ``python -m topoq VERB …`` as a user runs it, each a process of its own, timed
as its CPU seconds (user + system, from ``wait4``: what the process and the threads it
started cost, whatever else the machine is doing). The verbs: ``--help``; ``version``; the
server verbs ``list``, ``nodes`` and ``describe`` against a real ``topoq server`` of the same
revision (one per revision, started by this runner on a temporary data directory with the
README's cluster and policy, five one-node jobs submitted and twenty of the whole
cluster waiting behind them); and the offline ``place`` on the README's
example workload. Two reference rows give the floor every verb pays: the interpreter alone
(``python -c pass``) and importing Typer, the CLI framework (``python -c "import typer"``).

**Revisions**: today's code, and a baseline whose ``src/`` is extracted with ``git archive``
(``benchmarks.cycle.extract``) and put first on the child's ``PYTHONPATH``; their runs are
interleaved, so a machine that slows down slows both. Each row reports the fastest run (the
cost without interference) and the median. ``OPENBLAS_NUM_THREADS`` is removed from the
children's environment, so neither revision is helped by the caller's, and so is
``PYTHONDONTWRITEBYTECODE``: a verb runs from cached bytecode, as an installed topoq does (pip
compiles a wheel's modules at install; an editable install writes them on its first run), and
the first run of each verb and revision, which writes it, is not counted. With
``PYTHONDONTWRITEBYTECODE=1`` every verb also compiles the topoq modules it imports
(~0.1–0.2 s).

**Targets** (issue 11): ``place`` under 0.3 s, ``list`` and ``--help`` under 0.2 s. A
benchmark, not a timed test: it prints numbers and never fails on them.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.cycle import extract
from topoq.testing.server import running_server, whole_node_submission

REPO = Path(__file__).resolve().parents[1]
BASELINE_REVISION = "d3b3002"
"""The CLI before lazy start-up (issue 11, section 7)."""
EXAMPLE_WORKLOAD = "src/topoq/data/demo/1-llama-pretrain.yaml"
README_CLUSTER = "examples/clusters/hyperpod.yaml"
README_POLICY = "examples/policies/policy.yaml"
CLUSTER_NODES = 64
"""Nodes of the README's cluster."""
WAITING_JOBS = 20
"""Pending jobs on the list (``topoq list`` shows why each waits)."""
TARGETS_S = {"--help": 0.2, "list": 0.2, "place": 0.3}
REFERENCE = "reference"


@dataclass(frozen=True)
class Verb:
    name: str
    arguments: tuple[str, ...]
    needs_server: bool = False
    module: bool = True
    """``python -m topoq ARGS``; False: ``python ARGS`` (the reference rows)."""


VERBS = (
    Verb("python -c pass", ("-c", "pass"), module=False),
    Verb("import typer", ("-c", "import typer"), module=False),
    Verb("--help", ("--help",)),
    Verb("version", ("version",)),
    Verb("list", ("list",), needs_server=True),
    Verb("nodes", ("nodes",), needs_server=True),
    Verb("describe", ("describe", "startup-1"), needs_server=True),
    Verb("place", ("place", "--workload", EXAMPLE_WORKLOAD)),
)


@dataclass(frozen=True)
class Row:
    verb: str
    revision: str
    runs_s: tuple[float, ...]

    @property
    def fastest_s(self) -> float:
        return min(self.runs_s)

    @property
    def median_s(self) -> float:
        return statistics.median(self.runs_s)


def cpu_seconds(command: Sequence[str], environment: dict[str, str]) -> float:
    """The CPU time (user + system) of ``command`` run to its end; a failure is an error."""
    process = subprocess.Popen(
        command,
        env=environment,
        cwd=REPO,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    errors = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"error: {' '.join(command)} exited {process.returncode}:\n{errors!r}")
    return usage.ru_utime + usage.ru_stime


def child_environment(source: Path | None, server: tuple[str, Path] | None) -> dict[str, str]:
    environment = {
        key: value
        for key, value in os.environ.items()
        if key not in ("OPENBLAS_NUM_THREADS", "PYTHONPATH", "PYTHONDONTWRITEBYTECODE")
    }
    environment["PYTHONPATH"] = os.pathsep.join([str(source or REPO / "src")])
    environment["TOPOQ_CONFIG"] = os.devnull
    if server is not None:
        environment["TOPOQ_SERVER"], token_file = server[0], server[1]
        environment["TOPOQ_TOKEN_FILE"] = str(token_file)
    return environment


def command_of(verb: Verb) -> list[str]:
    return [sys.executable, *(("-m", "topoq") if verb.module else ()), *verb.arguments]


Server = tuple[str, Path]
"""A running server's URL and its admin token file."""


def measure(revisions: dict[str, Path | None], servers: dict[str, Server], runs: int) -> list[Row]:
    """Every verb ``runs`` times per revision, the revisions' runs interleaved; a revision's
    server verbs talk to the server of that revision."""
    rows: list[Row] = []
    for verb in VERBS:
        chosen = revisions if verb.module else {REFERENCE: None}
        times: dict[str, list[float]] = {revision: [] for revision in chosen}
        for _ in range(runs + 1):  # the first run of each writes the bytecode; not counted
            for revision, source in chosen.items():
                server = servers[revision] if verb.needs_server else None
                environment = child_environment(source, server)
                times[revision].append(cpu_seconds(command_of(verb), environment))
        rows += [Row(verb.name, revision, tuple(found[1:])) for revision, found in times.items()]
    return rows


def costliest_imports(verb: Verb, server: tuple[str, Path], count: int = 8) -> list[str]:
    """``python -X importtime`` of today's ``verb``: the ``count`` top-level imports with the
    largest cumulative time (microseconds of wall time, as Python reports them)."""
    environment = child_environment(None, server if verb.needs_server else None)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", *command_of(verb)[1:]],
        env=environment,
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    found: list[tuple[int, str]] = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        _, cumulative, name = line.split("|")
        if cumulative.strip().isdigit() and name.startswith(" ") and not name.startswith("  "):
            found.append((int(cumulative), name.strip()))
    found.sort(reverse=True)
    return [f"{name} {micros / 1000:.0f} ms" for micros, name in found[:count]]


def table(rows: Sequence[Row], *, markdown: bool = False) -> str:
    headers = ("verb", "revision", "fastest CPU s", "median CPU s", "target s")
    body = [
        (
            row.verb,
            row.revision,
            f"{row.fastest_s:.3f}",
            f"{row.median_s:.3f}",
            f"< {TARGETS_S[row.verb]}" if row.verb in TARGETS_S else "",
        )
        for row in rows
    ]
    if markdown:
        lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
        return "\n".join([*lines, *("| " + " | ".join(cells) + " |" for cells in body)])
    widths = [max(len(str(cells[i])) for cells in [headers, *body]) for i in range(len(headers))]
    return "\n".join(
        "  ".join(str(cell).ljust(width) for cell, width in zip(cells, widths, strict=True))
        for cells in [headers, *body]
    )


def ratios(rows: Sequence[Row], today: str, baseline: str) -> list[str]:
    by = {(row.verb, row.revision): row for row in rows}
    lines = []
    for verb in VERBS:
        now, before = by.get((verb.name, today)), by.get((verb.name, baseline))
        if now is not None and before is not None:
            lines.append(
                f"{verb.name}: {before.fastest_s:.3f} s -> {now.fastest_s:.3f} s "
                f"({before.fastest_s / now.fastest_s:.1f}x less CPU)"
            )
    return lines


def submitted_jobs(url: str, token_file: Path, count: int, waiting: int) -> None:
    """``count`` one-node jobs (``startup-1`` …), so that list and describe have rows, and
    ``waiting`` jobs of every node of the cluster (``startup-wait-1`` …), which wait with a
    reason the list shows."""
    token = token_file.read_text().strip()
    headers = {"Authorization": f"Bearer {token}"}
    bodies = [whole_node_submission(f"startup-{number}", "nlp") for number in range(1, count + 1)]
    for number in range(1, waiting + 1):
        body = whole_node_submission(f"startup-wait-{number}", "nlp")
        body["document"]["spec"]["podSets"][0]["count"] = CLUSTER_NODES  # type: ignore[index]
        bodies.append(body)
    for body in bodies:
        answer = httpx.post(f"{url}/api/v1/jobs", json=body, headers=headers, timeout=10)
        answer.raise_for_status()


def started_server(stack: contextlib.ExitStack, data_dir: Path, source: Path | None) -> Server:
    """A server of the revision whose ``src/`` is ``source`` (None: today's) on the README's
    cluster and policy, with the jobs ``submitted_jobs`` makes; stopped when ``stack`` closes.
    Each revision's CLI talks to its own revision's server, as a user's does."""
    server = stack.enter_context(
        running_server(
            data_dir,
            cluster=REPO / README_CLUSTER,
            policy=REPO / README_POLICY,
            environment=child_environment(source, None),
        )
    )
    token_file = server.data_dir / "admin-token"
    submitted_jobs(server.url, token_file, 5, WAITING_JOBS)
    return server.url, token_file


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per verb and revision")
    parser.add_argument("--baseline", default=BASELINE_REVISION, help='a git revision, or "none"')
    parser.add_argument("--imports", action="store_true", help="the costliest imports per verb")
    parser.add_argument("--markdown", action="store_true")
    options = parser.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="topoq-startup-") as scratch:
        revisions: dict[str, Path | None] = {"today": None}
        if options.baseline != "none":
            revisions[options.baseline] = extract(options.baseline, Path(scratch) / "baseline")
        with contextlib.ExitStack() as stack:
            servers = {
                revision: started_server(stack, Path(scratch) / f"data-{number}", source)
                for number, (revision, source) in enumerate(revisions.items())
            }
            time.sleep(2)  # a cycle gives the waiting jobs their reason
            rows = measure(revisions, servers, options.runs)
            imports = (
                {verb.name: costliest_imports(verb, servers["today"]) for verb in VERBS}
                if options.imports
                else {}
            )
    print(table(rows, markdown=options.markdown))
    if options.baseline != "none":
        print()
        print("\n".join(ratios(rows, "today", options.baseline)))
    for name, found in imports.items():
        if found:
            print(f"\n{name}: " + ", ".join(found))


if __name__ == "__main__":
    main()
