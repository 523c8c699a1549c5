"""No verb of ``topoq`` ever ends with a traceback: every command of the real app, found by
walking its command tree (so that a new verb is covered without a line here), is run with bad
arguments and in a bad environment, and each must end with ``error: …`` on standard error and
a documented exit code (docs/cli.md): 2 bad input, 3 server unreachable, 4 not allowed, 1 a
server error.

The cases run in-process through ``topoq.cli.app.main`` — the entry point the ``topoq`` script
calls — with typer's runner's isolation (its own standard streams and environment); an
exception that leaves ``main`` would be a traceback, and fails the case. A few run as a real
``topoq`` process too.
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any, get_args, get_type_hints

import pytest
import typer
from typer.testing import CliRunner

from topoq.cli import app as app_module

ROOT = Path(__file__).resolve().parents[2]
TOPOQ = Path(sys.executable).parent / "topoq"
UNREACHABLE = "http://127.0.0.1:1"
DOCUMENTED_FAILURES = frozenset({1, 2, 3, 4})
LONG_RUNNING = frozenset({("server",), ("demo",), ("dev", "k8s", "up"), ("dev", "slurm", "up")})
"""Verbs that, given valid input, start a server, a demo or a test bed: they only get the
cases that must fail before anything starts (an unknown option, a missing argument, a value
that is not a number)."""


# --- the commands -------------------------------------------------------------------------
@dataclass(frozen=True)
class Param:
    name: str
    opts: tuple[str, ...]
    argument: bool
    required: bool
    flag: bool
    kind: Any
    """The annotation with ``| None`` and ``list[...]`` taken off: ``Path``, ``int``, an enum…"""
    help: str


@dataclass(frozen=True)
class Verb:
    path: tuple[str, ...]
    params: tuple[Param, ...]

    @property
    def long_running(self) -> bool:
        return self.path in LONG_RUNNING

    @property
    def talks_to_a_server(self) -> bool:
        return any(param.name == "server" for param in self.params)


def _kind(annotation: Any) -> Any:
    inner = [arg for arg in get_args(annotation) if arg is not type(None)]
    return _kind(inner[0]) if inner else annotation


def _param(raw: Any, hints: dict[str, Any]) -> Param:
    annotation = hints.get(raw.name, str)
    return Param(
        name=raw.name,
        opts=tuple(raw.opts),
        argument=type(raw).__name__.endswith("Argument"),
        required=bool(raw.required),
        flag=bool(getattr(raw, "is_flag", False)),
        kind=_kind(annotation),
        help=str(getattr(raw, "help", "") or ""),
    )


def _walk(command: Any, path: tuple[str, ...]) -> Iterator[Verb]:
    children = getattr(command, "commands", None)
    if children is None:
        hints = get_type_hints(command.callback) if command.callback else {}
        yield Verb(path, tuple(_param(raw, hints) for raw in command.params))
        return
    for name, child in sorted(children.items()):
        yield from _walk(child, (*path, name))


VERBS = {" ".join(verb.path): verb for verb in _walk(typer.main.get_command(app_module.app), ())}


def plausible(param: Param) -> str:
    """A value of the right type, for a required parameter a case is not about."""
    if isinstance(param.kind, type) and issubclass(param.kind, Enum):
        return str(next(iter(param.kind)).value)
    if param.kind in (int, float):
        return "1"
    if param.kind is Path:
        return "no-such-file.yaml"
    return "x"


def command_line(verb: Verb, *, skip: str = "", given: Sequence[str] = ()) -> list[str]:
    """The verb with every required parameter but ``skip`` (and but those ``given``)."""
    words = list(verb.path)
    for param in verb.params:
        if not param.required or param.name in (skip, *given) or param.flag:
            continue
        words += [plausible(param)] if param.argument else [param.opts[0], plausible(param)]
    return words


def with_value(verb: Verb, param: Param, value: str) -> list[str]:
    words = command_line(verb, skip=param.name)
    return [*words, value] if param.argument else [*words, param.opts[0], value]


# --- running topoq ------------------------------------------------------------------------
@dataclass
class Run:
    code: int
    stdout: str
    stderr: str
    exception: BaseException | None = field(default=None)


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory to run in (no ``.topoq/admin-token``, no config file in its ``HOME``), with
    the bad files of the cases."""
    folder = tmp_path_factory.mktemp("sweep")
    (folder / "a-directory").mkdir()
    (folder / "empty.yaml").write_bytes(b"")
    (folder / "binary.yaml").write_bytes(bytes(range(256)) * 4)
    (folder / "home").mkdir()
    return folder


@pytest.fixture(autouse=True, scope="module")
def _one_command_tree() -> Iterator[None]:
    """The click command built from the app once for the module, not once per run (typer
    builds it on every call, about 0.1 s: a few runs of a process, hundreds here)."""
    built = typer.main.get_command(app_module.app)
    build = typer.main.get_command
    typer.main.get_command = lambda typer_app: (
        built if typer_app is app_module.app else build(typer_app)
    )
    yield
    typer.main.get_command = build


def quiet_environment(place: Path) -> dict[str, str | None]:
    return {
        "HOME": str(place / "home"),
        "TOPOQ_SERVER": UNREACHABLE,
        "TOPOQ_CONFIG": None,
        "TOPOQ_TOKEN": None,
        "TOPOQ_TOKEN_FILE": None,
        "TOPOQ_DATABASE_URL": None,
        "KUBECONFIG": str(place / "no-kubeconfig"),
        "TOPOQ_K8S_ASSETS": str(place / "no-assets"),
        "COLUMNS": "120",
    }


def run_topoq(args: Sequence[str], place: Path, env: dict[str, str | None] | None = None) -> Run:
    """``topoq ARGS`` through ``main``, in ``place``: what a user's terminal would show."""
    environment = {**quiet_environment(place), **(env or {})}
    saved_argv, saved_cwd = sys.argv, Path.cwd()
    with CliRunner().isolation(env=environment) as (stdout, stderr, _):
        sys.argv = ["topoq", *args]
        os.chdir(place)
        code, exception = 0, None
        try:
            app_module.main()
        except SystemExit as done:
            code = done.code if isinstance(done.code, int) else 1
        except BaseException as error:  # any exception leaving main is the bug
            code, exception = -1, error
        finally:
            sys.argv = saved_argv
            os.chdir(saved_cwd)
            sys.stdout.flush()
            sys.stderr.flush()
        return Run(code, stdout.getvalue().decode(), stderr.getvalue().decode(), exception)


def assert_a_clean_failure(run: Run, *, codes: frozenset[int] = DOCUMENTED_FAILURES) -> None:
    assert run.exception is None, f"{type(run.exception).__name__}: {run.exception}"
    assert "Traceback" not in run.stderr, run.stderr
    assert run.code in codes, (run.code, run.stderr, run.stdout[-500:])
    if run.code != 0:
        assert run.stderr.strip(), "a failure must say why on standard error"


def assert_one_error_line(run: Run) -> None:
    """The error is one line, the last; only notes (``note: no --nodes given…``) come before."""
    *before, last = run.stderr.strip().splitlines() or [""]
    assert last.startswith("error: "), run.stderr
    assert all(line.startswith(("note: ", "warning: ")) for line in before), run.stderr


# --- the cases ----------------------------------------------------------------------------
def is_text(param: Param) -> bool:
    chosen = isinstance(param.kind, type) and issubclass(param.kind, Enum)
    return (param.kind is str or chosen) and not param.flag


def cases() -> Iterator[Any]:
    for name, verb in VERBS.items():
        yield pytest.param(name, "unknown option", id=f"{name}: unknown option")
        for param in verb.params:
            if param.required:
                yield pytest.param(name, f"missing {param.name}", id=f"{name}: no {param.name}")
            if param.kind in (int, float) and not param.flag:
                for value in ("abc", "-1", "1e400", "9" * 30):
                    if verb.long_running and value not in ("abc", "-1"):  # inf is a float
                        continue
                    yield pytest.param(
                        name, f"number {param.name} {value}", id=f"{name}: {param.name}={value}"
                    )
            if is_text(param) and not verb.long_running:
                yield pytest.param(name, f"text {param.name}", id=f"{name}: {param.name}=?")
            if param.kind is Path and not verb.long_running:
                for bad in ("no-such-file.yaml", "a-directory", "empty.yaml", "binary.yaml"):
                    yield pytest.param(
                        name, f"path {param.name} {bad}", id=f"{name}: {param.name}={bad}"
                    )
        if verb.talks_to_a_server and not verb.long_running:
            yield pytest.param(name, "unreachable", id=f"{name}: unreachable server")


def _find(verb: Verb, name: str) -> Param:
    return next(param for param in verb.params if param.name == name)


@pytest.mark.parametrize(("name", "case"), list(cases()))
def test_a_bad_argument_ends_the_verb_cleanly(name: str, case: str, place: Path) -> None:
    verb = VERBS[name]
    kind, _, rest = case.partition(" ")
    if case == "unknown option":
        run = run_topoq([*command_line(verb), "--no-such-option"], place)
        assert_a_clean_failure(run, codes=frozenset({2}))
        assert_one_error_line(run)
    elif kind == "missing":
        run = run_topoq(command_line(verb, skip=rest), place)
        assert_a_clean_failure(run, codes=frozenset({2}))
        assert_one_error_line(run)
    elif kind == "number":
        param_name, value = rest.split(" ")
        words = with_value(verb, _find(verb, param_name), value)
        if verb.long_running and value != "abc":  # a process, stopped if it starts after all
            run = real_topoq(words, place, {}, timeout_s=20)
        else:
            run = run_topoq(words, place)
        if value in ("abc", "-1"):  # a huge number may be fine: as many levels as there are
            assert_a_clean_failure(run)
        else:
            assert_a_clean_failure(run, codes=DOCUMENTED_FAILURES | {0})
    elif kind == "text":
        param = _find(verb, rest)
        run = run_topoq(with_value(verb, param, "no such value é\x7f"), place)
        choices = isinstance(param.kind, type) and issubclass(param.kind, Enum)
        assert_a_clean_failure(run, codes=frozenset({2}) if choices else DOCUMENTED_FAILURES | {0})
    elif kind == "path":
        param_name, bad = rest.split(" ")
        assert_a_bad_path_ends_cleanly(verb, _find(verb, param_name), place / bad, place)
    else:
        run = run_topoq([*command_line(verb), "--server", UNREACHABLE], place)
        assert_a_clean_failure(run, codes=frozenset({2, 3}))


def assert_a_bad_path_ends_cleanly(verb: Verb, param: Param, path: Path, place: Path) -> None:
    """A path that cannot be read fails; one the verb may write (``--out``, ``--log``) may also
    succeed when the verb wrote it, and a directory's (``dev k8s down DIR``) when none is
    needed there."""
    before = path.read_bytes() if path.is_file() else None
    run = run_topoq(with_value(verb, param, str(path)), place)
    if run.code == 0 and run.exception is None:
        wrote = path.is_file() and path.read_bytes() != before
        a_directory = "director" in param.help.lower()
        assert wrote or a_directory, f"exit 0 with {path.name} for {param.opts[0]}: {run.stdout}"
        if before is None and path.is_file():
            path.unlink()
        elif before is not None:
            path.write_bytes(before)
        return
    assert_a_clean_failure(run)


# --- a bad environment ----------------------------------------------------------------------
def bad_environments(place: Path) -> dict[str, dict[str, str | None]]:
    (place / "config").mkdir(exist_ok=True)
    configs = {
        "not yaml": "server: [http://x\n",
        "a tab": "server:\thttp://x\n",
        "a list": "- server\n",
        "wrong type": "server: 8750\ntoken: [a]\n",
        "unknown key": "sever: http://127.0.0.1:1\n",
        "binary": "\x00\xff",
        "token_file missing": "token_file: no-such-token\n",
    }
    environments: dict[str, dict[str, str | None]] = {}
    for index, (what, text) in enumerate(configs.items()):
        path = place / "config" / f"config-{index}.yaml"
        path.write_bytes(text.encode("latin-1"))
        environments[f"config: {what}"] = {"TOPOQ_CONFIG": str(path)}
    (place / "config" / "default.yaml").mkdir(exist_ok=True)
    environments |= {
        "config: a directory": {"TOPOQ_CONFIG": str(place / "config" / "default.yaml")},
        "config: missing": {"TOPOQ_CONFIG": "no-such-config.yaml"},
        "token file: relative, missing": {"TOPOQ_TOKEN_FILE": "no/such/token"},
        "token file: a directory": {"TOPOQ_TOKEN_FILE": "a-directory"},
        "token file: empty": {"TOPOQ_TOKEN_FILE": "empty.yaml"},
        "token file: binary": {"TOPOQ_TOKEN_FILE": "binary.yaml"},
        "token: not ascii": {"TOPOQ_TOKEN": "tökén"},
        "server: no scheme": {"TOPOQ_SERVER": "127.0.0.1:8750"},
        "server: bad port": {"TOPOQ_SERVER": "http://127.0.0.1:99999"},
        "server: port not a number": {"TOPOQ_SERVER": "http://127.0.0.1:http"},
        "server: bad IPv6": {"TOPOQ_SERVER": "http://[::1"},
        "server: ftp": {"TOPOQ_SERVER": "ftp://127.0.0.1"},
    }
    return environments


ENVIRONMENT_CASES = [
    "config: not yaml",
    "config: a tab",
    "config: a list",
    "config: wrong type",
    "config: unknown key",
    "config: binary",
    "config: token_file missing",
    "config: a directory",
    "config: missing",
    "token file: relative, missing",
    "token file: a directory",
    "token file: empty",
    "token file: binary",
    "token: not ascii",
    "server: no scheme",
    "server: bad port",
    "server: port not a number",
    "server: bad IPv6",
    "server: ftp",
]
SERVER_VERBS = [
    name for name, verb in VERBS.items() if verb.talks_to_a_server and not verb.long_running
]


@pytest.mark.parametrize("environment", ENVIRONMENT_CASES)
def test_a_bad_setting_ends_every_server_verb_with_one_line_and_exit_2(
    environment: str, place: Path
) -> None:
    env = bad_environments(place)[environment]
    setting = {"config": "config", "token file": "TOPOQ_TOKEN_FILE", "token": "TOPOQ_TOKEN"}.get(
        environment.split(":", maxsplit=1)[0], "TOPOQ_SERVER"
    )
    for name in SERVER_VERBS:
        verb = VERBS[name]
        run = run_topoq(command_line(verb), place, env)
        assert_a_clean_failure(run, codes=frozenset({2}))
        assert_one_error_line(run)
    named = run_topoq(["list"], place, env)  # a verb with nothing else to reject first
    assert setting in named.stderr, named.stderr


def test_a_relative_token_file_is_read_from_the_current_directory(place: Path) -> None:
    (place / "token").write_text("not-a-real-token\n")
    run = run_topoq(["list"], place, {"TOPOQ_TOKEN_FILE": "token"})
    assert run.code == 3 and "cannot reach" in run.stderr, run.stderr  # got as far as the server


# --- a server that is not topoq -------------------------------------------------------------
ANSWERS: dict[str, tuple[int, str, bytes]] = {
    "html": (200, "text/html", b"<html><body>hello</body></html>"),
    "a json list": (200, "application/json", b"[1, 2]"),
    "the wrong json": (200, "application/json", b'{"unexpected": true}'),
    "binary": (200, "application/octet-stream", bytes(range(256))),
    "a 500 page": (500, "text/html", b"<h1>Internal Server Error</h1>"),
    "a 404 list": (404, "application/json", b"[]"),
    "a 401 page": (401, "text/plain", b"go away"),
}


class _Answers(http.server.BaseHTTPRequestHandler):
    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        status, kind, body = ANSWERS[self.path.split("/")[1].replace("-", " ")]
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture(scope="module")
def not_topoq() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


EXAMPLE_FILES = (
    ROOT / "examples" / "workloads" / "required-block.yaml",
    ROOT / "examples" / "policies" / "policy.yaml",
    ROOT / "examples" / "clusters" / "small-explicit.yaml",
)


def with_example_files(verb: Verb) -> list[list[str]]:
    """The verb's command line, once with each example file for its required file (so that
    it gets as far as the server), or as it is when it needs none."""
    files = [param for param in verb.params if param.required and param.kind is Path]
    if not files:
        return [command_line(verb)]
    lines = []
    for example in EXAMPLE_FILES:
        words = command_line(verb, given=[param.name for param in files])
        for param in files:
            words += [str(example)] if param.argument else [param.opts[0], str(example)]
        lines.append(words)
    return lines


@pytest.mark.parametrize("answer", list(ANSWERS))
def test_a_server_that_answers_what_topoq_would_not_ends_every_verb_cleanly(
    answer: str, place: Path, not_topoq: str
) -> None:
    env: dict[str, str | None] = {"TOPOQ_SERVER": f"{not_topoq}/{answer.replace(' ', '-')}"}
    for name in SERVER_VERBS:
        for words in with_example_files(VERBS[name]):
            run = run_topoq(words, place, env)
            assert_a_clean_failure(run)
            assert_one_error_line(run)


# --- as a user runs it ------------------------------------------------------------------------
def real_topoq(
    args: Sequence[str], place: Path, env: dict[str, str | None], *, timeout_s: float = 60
) -> Run:
    """``topoq ARGS`` as a process in its own session: one still running after ``timeout_s``
    is stopped, with all it started, and fails the case."""
    environment = {**os.environ, **quiet_environment(place), **env}
    process = subprocess.Popen(
        [str(TOPOQ), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=place,
        env={key: value for key, value in environment.items() if value is not None},
        start_new_session=True,
    )
    try:
        stdout, stderr = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        pytest.fail(f"topoq {' '.join(args)} still ran after {timeout_s} s")
    return Run(process.returncode, stdout, stderr)


@pytest.mark.parametrize(
    ("args", "env", "code"),
    [
        (["list"], {"TOPOQ_SERVER": "127.0.0.1:8750"}, 2),
        (["list"], {"TOPOQ_TOKEN_FILE": "a-directory"}, 2),
        (["teams", "--server", UNREACHABLE], {}, 3),
        (["policy", "convert", "--from-hyperpod", "--format", "toml"], {}, 2),
        (["submit", str(EXAMPLE_FILES[0]), "--format", "slurm"], {}, 2),
        (["topology", "export", "--to", "kueue", "--out", "a-directory"], {}, 2),
        (["place", "--no-such-option"], {}, 2),
    ],
    ids=["bad server", "token dir", "unreachable", "format", "job format", "out dir", "option"],
)
def test_the_topoq_program_ends_with_one_line(
    args: list[str], env: dict[str, str | None], code: int, place: Path
) -> None:
    run = real_topoq(args, place, env)
    assert run.code == code, run.stderr
    assert "Traceback" not in run.stderr
    assert_one_error_line(run)


def test_a_postgresql_url_without_its_driver_names_the_extra_to_install(place: Path) -> None:
    """``topoq server`` on PostgreSQL where psycopg cannot be imported: one line, exit 2."""
    blocked = (
        "import sys; sys.modules['psycopg'] = None; sys.argv[0] = 'topoq'; "
        "from topoq.cli.app import main; main()"
    )
    started = time.monotonic()
    run = subprocess.run(
        [sys.executable, "-c", blocked, "server", "--port", "0", "--data-dir", str(place / "data")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=place,
        env={**os.environ, "TOPOQ_DATABASE_URL": "postgresql://topoq@127.0.0.1:1/topoq"},
    )
    assert time.monotonic() - started < 30
    assert run.returncode == 2, run.stderr
    assert_one_error_line(Run(run.returncode, run.stdout, run.stderr))
    assert "pip install 'topoq[postgres]'" in run.stderr
