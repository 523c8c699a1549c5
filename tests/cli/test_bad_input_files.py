"""Every offline verb, given a bad file in any of its file options, ends with one line on
standard error and exit code 2 — never a traceback, never a hang.

The verbs run in-process through typer's runner on the real ``topoq`` app (each case is a
real command line); a few cases run as a subprocess too, the way a user runs them.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from topoq.cli.app import EXIT_BAD_INPUT, app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
WORKLOAD = EXAMPLES / "workloads" / "required-block.yaml"
POLICY = EXAMPLES / "policies" / "policy.yaml"
HYPERPOD = EXAMPLES / "policies" / "hyperpod"

BAD_FILES: dict[str, Callable[[], bytes]] = {
    "nested json": lambda: b"[" * 100_000 + b"]" * 100_000,
    "nested yaml": lambda: b"a: " + b"[" * 5_000 + b"]" * 5_000,
    "duplicate keys": lambda: b"apiVersion: topoq.io/v1\nkind: Policy\nkind: Cluster\n",
    "duplicate json keys": lambda: b'{"kind": "NodeList", "items": [], "items": []}',
    "huge number": lambda: b'{"kind": ' + b"9" * 5_000 + b"}",
    "nan": lambda: b'{"kind": NaN, "items": [Infinity]}',
    "alias bomb": lambda: b"a: &a [x, x, x, x]\nb: &b [*a, *a, *a, *a]\nc: [*b, *b, *b, *b]\n",
    "binary": lambda: bytes(range(256)) * 4,
    "empty": lambda: b"",
    "line breaks in a key": lambda: b'{"apiVersion": "topoq.io/v1", "kind": "Job", "a\\nb": 1}',
}

# Each verb with a bad file in one of its file options ("{bad}" stands for the file).
VERBS: dict[str, list[str]] = {
    "place --workload": ["place", "-w", "{bad}"],
    "place --nodes": ["place", "-w", str(WORKLOAD), "-n", "{bad}"],
    "place --topology": ["place", "-w", str(WORKLOAD), "-t", "{bad}"],
    "place --pods": ["place", "-w", str(WORKLOAD), "-p", "{bad}"],
    "topology show": ["topology", "show", "-n", "{bad}"],
    "topology validate": ["topology", "validate", "-n", "{bad}"],
    "topology export": ["topology", "export", "--to", "kueue", "-n", "{bad}"],
    "policy lint": ["policy", "lint", "-P", "{bad}"],
    "policy lint --gang": ["policy", "lint", "-P", str(POLICY), "-g", "nlp={bad}"],
    "policy show": ["policy", "show", "-P", "{bad}"],
    "policy show --hyperpod-quota": ["policy", "show", "--hyperpod-quota", "{bad}"],
    "policy convert": [
        "policy",
        "convert",
        "--from-hyperpod",
        "--hyperpod-scheduler-config",
        "{bad}",
        "--hyperpod-quota",
        str(HYPERPOD / "quota-nlp.json"),
    ],
    "simulate": ["simulate", "{bad}"],
}


def arguments(verb: str, bad: Path) -> list[str]:
    return [part.replace("{bad}", str(bad)) for part in VERBS[verb]]


def assert_one_line_and_exit_2(code: int, stderr: str) -> None:
    assert "Traceback" not in stderr, stderr
    assert code == EXIT_BAD_INPUT, stderr
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bad")
    paths = {}
    for index, (name, content) in enumerate(BAD_FILES.items()):
        paths[name] = folder / f"bad-{index}.yaml"
        paths[name].write_bytes(content())
    return paths


@pytest.mark.parametrize("bad", list(BAD_FILES))
@pytest.mark.parametrize("verb", list(VERBS))
def test_a_bad_file_ends_the_verb_with_one_line_and_exit_2(
    verb: str, bad: str, bad_files: dict[str, Path]
) -> None:
    started = time.monotonic()
    result = CliRunner().invoke(app, arguments(verb, bad_files[bad]))
    assert time.monotonic() - started < 5
    assert result.exception is None or isinstance(result.exception, SystemExit), repr(
        result.exception
    )
    assert_one_line_and_exit_2(result.exit_code, result.stderr)


@pytest.mark.parametrize(
    ("verb", "bad"),
    [("place --workload", "nested json"), ("policy show", "duplicate keys"), ("simulate", "nan")],
)
def test_a_bad_file_in_a_real_command_line_exits_2_with_one_line(
    verb: str, bad: str, bad_files: dict[str, Path]
) -> None:
    run = subprocess.run(
        [sys.executable, "-m", "topoq", *arguments(verb, bad_files[bad])],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert_one_line_and_exit_2(run.returncode, run.stderr)
