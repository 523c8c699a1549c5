"""A verb imports what it uses (docs/adr/0010): ``--help`` and ``version`` neither numpy, the
core, a job-format reader nor pydantic; the server verbs no numpy, core, reader or httpx (the
CLI's client speaks HTTP with the standard library); ``place`` reads its workload without the
Slurm, AWS or Kubernetes cluster readers. Checked on the modules each verb's process really
imported (``python -X importtime``), not on timings: benchmarks/startup.py measures those."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.main import get_command

from tests.cli.test_server_cli import server
from topoq.cli.app import app, only_the_invoked

ROOT = Path(__file__).resolve().parents[2]
__all__ = ["server"]

EVERY_VERB_MUST_NOT = ("numpy", "topoq.core", "topoq.discovery", "httpx", "yaml")
OFFLINE_MUST_NOT = (*EVERY_VERB_MUST_NOT, "pydantic", "topoq.wire")
CLUSTER_READERS = ("topoq.discovery.slurm", "topoq.discovery.aws", "topoq.discovery.kubernetes")


def run_topoq(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``python ARGS`` (``-m topoq …``) with the TOPOQ_ settings of ``env`` alone."""
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TOPOQ_")} | env
    return subprocess.run(
        [sys.executable, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=environment,
        timeout=120,
        check=False,
    )


def imported_by(env: dict[str, str], *args: str, exit_code: int = 0) -> set[str]:
    """The modules ``python -m topoq ARGS`` imported (it must exit ``exit_code``)."""
    done = run_topoq(env, "-X", "importtime", "-m", "topoq", *args)
    assert done.returncode == exit_code, done.stderr[-2000:]
    return {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and line.count("|") == 2
    }


def offending(modules: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(
        name for name in modules if any(name == f or name.startswith(f"{f}.") for f in forbidden)
    )


@pytest.mark.parametrize("args", [("--help",), ("version",), ("submit", "--help")])
def test_help_and_version_import_no_placement_reader_or_pydantic(args: tuple[str, ...]) -> None:
    modules = imported_by({}, *args)
    assert "topoq.cli.app" in modules  # the listing is real
    assert offending(modules, OFFLINE_MUST_NOT) == []


@pytest.mark.parametrize(
    "args", [("list",), ("nodes",), ("teams",), ("events",), ("describe", "no-such-job")]
)
def test_server_verbs_import_no_placement_reader_or_httpx(
    server: dict[str, str], args: tuple[str, ...]
) -> None:
    rejected = args[0] == "describe"  # a job that does not exist: exit 2, a real answer
    modules = imported_by(server, *args, exit_code=2 if rejected else 0)
    assert "topoq.client.http" in modules and "topoq.wire.v1" in modules
    assert offending(modules, EVERY_VERB_MUST_NOT) == []
    if args[0] in ("list", "nodes", "teams", "events"):  # plain tables: no Rich to load
        assert offending(modules, ("rich",)) == []


def test_place_reads_a_topoq_workload_without_the_cluster_readers_it_does_not_need() -> None:
    modules = imported_by({}, "place", "--workload", "src/topoq/data/demo/1-llama-pretrain.yaml")
    assert "numpy" in modules and "topoq.core.placement" in modules
    assert offending(modules, CLUSTER_READERS) == []
    assert offending(modules, ("httpx", "topoq.client")) == []


def test_only_the_verb_or_group_named_is_built() -> None:
    """Typer builds every verb it holds before it parses; main runs one holding the named verb
    or group alone, and all of topoq when the line names none (help, a typo's suggestions)."""

    def verbs(arguments: list[str]) -> set[str]:
        return set(get_command(only_the_invoked(arguments)).commands)  # type: ignore[attr-defined]

    everything = verbs([])
    assert {"list", "submit", "policy", "topology", "server", "version"} <= everything
    assert verbs(["list", "--team", "nlp"]) == {"list"}
    assert verbs(["policy", "lint", "--policy", "p.yaml"]) == {"policy"}
    assert set(get_command(only_the_invoked(["policy"])).commands["policy"].commands) >= {  # type: ignore[attr-defined]
        "lint",
        "apply",
        "history",
    }
    for nothing_named in (["--help"], ["lst"], []):
        assert only_the_invoked(nothing_named) is app


def test_a_verb_run_alone_reads_its_line_as_before(server: dict[str, str]) -> None:
    """``topoq list --help`` names the verb; a bad option names the verb's help."""
    helped = run_topoq(server, "-m", "topoq", "list", "--help")
    assert helped.returncode == 0 and "topoq list [OPTIONS]" in helped.stdout.splitlines()[0]
    bad = run_topoq(server, "-m", "topoq", "list", "--bogus")
    assert bad.returncode == 2
    assert bad.stderr.strip().endswith("topoq list --help)"), bad.stderr
