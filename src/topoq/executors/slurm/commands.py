"""Slurm's own commands, run against one cluster (``SLURM_CONF``): what the executor asks and
tells Slurm, parsed into plain data. Every call has a timeout; a command that fails raises
``SlurmCommandFailed`` with what it printed."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from topoq.discovery.hostlist import expand_hostlist
from topoq.domain.errors import TopoqError

COMMAND_TIMEOUT_S = 30.0


class SlurmCommandFailed(TopoqError):
    """A Slurm command could not be run or exited non-zero."""


@dataclass(frozen=True)
class SlurmJob:
    """One job (or heterogeneous component) as ``squeue`` shows it."""

    job_id: int
    comment: str
    state: str
    """``PENDING``, ``RUNNING``, ``COMPLETED``, ``FAILED``, ``CANCELLED``, ``NODE_FAIL``, …"""
    nodes: tuple[str, ...]
    reason: str
    het_offset: int = 0


SQUEUE_FIELDS = "JobID:|,HetJobOffset:|,State:|,Reason:|,NodeList:|,Comment:"
"""What ``jobs`` asks ``squeue`` for, ``|`` after each field; the comment (free text) last.
Not ``squeue --json``: in Slurm 22.05 it ignores ``--jobs``, prints every job the controller
still knows (ended ones for ``MinJobAge``) at ~3.5 KiB each, and took ~60 ms on an idle
machine with 400 jobs (over 300 ms beside a busy cluster) against ~9 ms for this."""
EXIT_CODE = re.compile(r"(?:^|\s)ExitCode=(\d+):(\d+)(?:\s|$)")


def shell_exit_code(code: int, signal: int) -> int:
    """A status as a shell says it: the code, or 128 + the signal that ended it."""
    return 128 + signal if signal else code


@dataclass(frozen=True)
class SlurmNode:
    """One node as ``sinfo --json`` shows it."""

    name: str
    address: str
    cpus: int
    memory_mb: int
    gpus: int
    state: str
    flags: tuple[str, ...]
    partitions: tuple[str, ...]
    reason: str = ""
    """Why the node is down or drained, as whoever set it said."""


class SlurmCommands:
    """Runs Slurm's commands with ``SLURM_CONF`` set to ``slurm_conf`` (the environment's
    when None)."""

    def __init__(self, slurm_conf: Path | str | None = None) -> None:
        self.environment = dict(os.environ)
        if slurm_conf is not None:
            self.environment["SLURM_CONF"] = str(slurm_conf)

    def run(self, argv: Sequence[str], *, environment: Mapping[str, str] | None = None) -> str:
        """``argv``'s output (``environment``: variables beside the executor's own)."""
        try:
            done = subprocess.run(
                list(argv),
                env={**self.environment, **environment} if environment else self.environment,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as error:
            raise SlurmCommandFailed(f"{argv[0]} could not run: {error}") from None
        if done.returncode != 0:
            said = (done.stderr or done.stdout).strip().splitlines()
            raise SlurmCommandFailed(
                f"{' '.join(argv[:2])} failed: {said[-1] if said else done.returncode}"
            )
        return done.stdout

    def submit(self, options: Sequence[str], script: Path, environment: Mapping[str, str]) -> int:
        """``sbatch --parsable OPTIONS SCRIPT``; the job's id."""
        out = self.run(["sbatch", "--parsable", *options, str(script)], environment=environment)
        first = out.strip().split(";")[0]
        if not first.isdigit():
            raise SlurmCommandFailed(f"sbatch answered {out.strip()!r}, not a job id")
        return int(first)

    def jobs(self, partition: str) -> list[SlurmJob]:
        """Every job of ``partition`` Slurm still knows (running, pending and recently ended)."""
        out = self.run(
            [
                "squeue",
                "--noheader",
                "--states=all",
                f"--partition={partition}",
                "-O",
                SQUEUE_FIELDS,
            ]
        )
        return [_job(line) for line in out.splitlines() if line.strip()]

    def exit_code(self, job_id: int) -> int:
        """How job ``job_id``'s batch script ended, as a shell says it (``scontrol show
        job``'s ``ExitCode=code:signal``); 0 when Slurm does not say."""
        for line in self.run(["scontrol", "show", "job", "--oneliner", str(job_id)]).splitlines():
            if f"JobId={job_id} " in f"{line} ":
                found = EXIT_CODE.search(line)
                if found is not None:
                    return shell_exit_code(int(found.group(1)), int(found.group(2)))
        return 0

    def nodes(self) -> list[SlurmNode]:
        found = json.loads(self.run(["sinfo", "--json"]))
        return [_node(entry) for entry in found.get("nodes", [])]

    def node(self, name: str) -> SlurmNode | None:
        """Node ``name`` as ``sinfo --json`` shows it (None when Slurm does not know it)."""
        return next((node for node in self.nodes() if node.name == name), None)

    def cancel(self, job_ids: Sequence[int], *, signal: str | None = None) -> None:
        """``scancel`` the jobs (with ``signal``: only signal their steps)."""
        if not job_ids:
            return
        options = [f"--signal={signal}"] if signal else []
        self.run(["scancel", *options, *map(str, job_ids)])

    def set_node_state(self, node: str, state: str, reason: str = "") -> None:
        words = ["scontrol", "update", f"NodeName={node}", f"State={state}"]
        self.run([*words, f"Reason={reason}"] if reason else words)

    def topology(self) -> str:
        """``scontrol show topology``: topology.conf's switches as Slurm reads them."""
        return self.run(["scontrol", "show", "topology"])


def _job(line: str) -> SlurmJob:
    """One line of ``squeue -O SQUEUE_FIELDS``."""
    job_id, het_offset, state, reason, nodes, comment = line.rstrip("\n").split("|", 5)
    comment = comment.rstrip()
    nodes = nodes.strip()
    return SlurmJob(
        job_id=int(job_id),
        comment="" if comment == "(null)" else comment,
        state=state.strip(),
        nodes=tuple(expand_hostlist(nodes)) if nodes and nodes != "(null)" else (),
        reason=reason.strip(),
        het_offset=int(het_offset) if het_offset.strip().isdigit() else 0,
    )


def _node(entry: Mapping[str, Any]) -> SlurmNode:
    return SlurmNode(
        name=str(entry["name"]),
        address=str(entry.get("address") or entry["name"]),
        cpus=int(entry.get("cpus") or 0),
        memory_mb=int(entry.get("real_memory") or 0),
        gpus=gpus_of(str(entry.get("gres") or "")),
        state=str(entry.get("state") or "").lower(),
        flags=tuple(str(flag).upper() for flag in entry.get("state_flags") or ()),
        partitions=tuple(entry.get("partitions") or ()),
        reason=str(entry.get("reason") or ""),
    )


def gpus_of(gres: str) -> int:
    """The GPUs a node's ``gres`` names (``gpu:8``, ``gpu:h100:8(S:0-1)``, …)."""
    total = 0
    for item in gres.split(","):
        parts = item.split("(")[0].split(":")
        if parts[0] == "gpu" and parts[-1].isdigit():
            total += int(parts[-1])
    return total
