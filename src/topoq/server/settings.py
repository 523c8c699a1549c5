"""``topoq server``'s settings: one frozen object whose every field declares its command-line
option (flag, help, the executor it is for, and the keyword that executor's factory takes it
as). The parser of ``python -m topoq.bootstrap``, the options of ``topoq server``, the command
line of the API processes and the executor's options are all made from these fields, so a new
option is one field here (and, for an executor, one keyword of its factory).

Light to import: ``topoq server``'s options are built from it on every start of the CLI."""

from __future__ import annotations

import argparse
import dataclasses
import typing
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, NoneType, UnionType
from typing import Any

from topoq.domain.errors import InvalidInputError
from topoq.domain.quantity import parse_quantity

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8750
DEFAULT_EXECUTOR = "local"
DEFAULT_POD_LOG_LIMIT = "64Mi"
DEFAULT_POD_LOG_LIMIT_BYTES = 64 << 20
MAX_API_PROCESSES = 64
"""The most API processes (and, apart, warmed spares) a server starts: more only exhausts the
machine (each is a Python process of ~60 MiB)."""
LOG_FORMATS = ("text", "json")
LOG_LEVELS = ("debug", "info", "warning", "error")
HYPERPOD_LEVELS_TEXT = (
    "topology.k8s.aws/network-node-layer-1..3,kubernetes.io/hostname"  # for the help only
)


@dataclass(frozen=True)
class Option:
    """How a settings field is given on a command line."""

    help: str
    flag: str = ""
    """Default: the field's name, dashed (``slurm_conf`` → ``--slurm-conf``)."""
    executor: str = ""
    """The executor the option is for (its help says so); "": any."""
    takes: Mapping[str, str] = field(default_factory=dict)
    """Executor name → the keyword its factory takes this value as."""
    parse: Callable[[str], Any] | None = None
    """From the command line's text to the field's value (None: the field's type does)."""
    show: Callable[[Any], str] = str
    """From the field's value back to text that ``parse`` reads (for the API processes)."""
    choices: tuple[str, ...] = ()
    private: bool = False
    """Never written on a command line (``ps`` shows those): the database URL."""
    text_default: str = ""
    """The default as a user writes it, when ``parse`` makes it something else."""

    def flag_of(self, name: str) -> str:
        return self.flag or "--" + name.replace("_", "-")

    def help_text(self) -> str:
        if not self.executor:
            return self.help
        return f"With --executor {self.executor}: {self.help[0].lower()}{self.help[1:]}"


def option(default: Any, help: str, **details: Any) -> Any:
    """A settings field with its command-line option (see ``Option``)."""
    if "keyword" in details:
        details["takes"] = {details["executor"]: details.pop("keyword")}
    return field(default=default, metadata={"option": Option(help, **details)})


def topology_levels(text: str) -> tuple[str, ...]:
    """``--topology-levels``: comma-separated node labels, broadest first."""
    levels = tuple(part.strip() for part in text.split(",") if part.strip())
    if not levels:
        raise InvalidInputError(
            "no topology level given",
            where="--topology-levels",
            hint=f"give node labels, broadest first, e.g. {HYPERPOD_LEVELS_TEXT}",
        )
    return levels


def log_limit_bytes(text: str) -> int:
    """``--pod-log-limit`` (a size such as ``64Mi``) in bytes."""
    try:
        return parse_quantity("memory", text)
    except InvalidInputError as error:
        raise InvalidInputError(
            error.message, where="--pod-log-limit", hint="a size such as 64Mi or 1Gi"
        ) from None


@dataclass(frozen=True)
class ServerSettings:
    """Everything ``topoq server`` is told at start; checked when made."""

    host: str = option(DEFAULT_HOST, "The address to listen on.")
    port: int = option(DEFAULT_PORT, "The port to listen on.")
    database_url: str | None = option(
        None,
        "postgresql://… (default: TOPOQ_DATABASE_URL, else SQLite in the data directory). A "
        "password given here shows in `ps`: put the URL in TOPOQ_DATABASE_URL, or the password "
        "in PGPASSFILE or PGPASSWORD.",
        flag="--database",
        private=True,
    )
    data_dir: Path = option(
        Path(".topoq"),
        "Where the store, logs and token live (made private to you: 0700, files 0600).",
    )
    cluster_file: Path | None = option(
        None,
        "The cluster (any format `topoq place` reads; default: the example). With --executor "
        "slurm: the nodes' topology and labels, e.g. their instance type (their resources and "
        "state still come from Slurm).",
        flag="--cluster",
        takes={"slurm": "topology_file"},
    )
    policy_file: Path | None = option(None, "A policy file to apply on start.", flag="--policy")
    executor: str = option(
        DEFAULT_EXECUTOR,
        "local (each pod a process here), kubernetes (each pod a Pod on the cluster of "
        "--kubeconfig) or slurm (each gang a Slurm job on the cluster of --slurm-conf).",
    )
    topology_levels: tuple[str, ...] = option(
        (),
        "Node labels of the topology levels, broadest first, comma-separated (default: the "
        f"cluster file's; with --executor kubernetes, {HYPERPOD_LEVELS_TEXT}; with --executor "
        "slurm, the switches of topology.conf).",
        parse=topology_levels,
        show=",".join,
    )
    step_interval_s: float = option(
        0.5,
        "Seconds from one controller step's start to the next when nothing wakes it sooner (a "
        "submission or any change through the API does): how soon an end the executor "
        "learns of by looking (Slurm's squeue) frees its nodes.",
        flag="--step-interval",
    )
    api_workers: int = option(1, "API processes to start beside the controller's own (ADR 0004).")
    api_spares: int = option(
        1,
        "Warmed API processes kept waiting: one replaces an API process that dies within "
        "milliseconds instead of a cold start of seconds (0: none).",
    )
    pod_log_limit_bytes: int = option(
        DEFAULT_POD_LOG_LIMIT_BYTES,
        "What the local executor keeps of each pod's output on disk (rotated into pod-N.log.1 "
        "past half of it).",
        flag="--pod-log-limit",
        parse=log_limit_bytes,
        text_default=DEFAULT_POD_LOG_LIMIT,
        takes={"local": "pod_log_limit_bytes"},
    )
    keep_pods_on_exit: bool = option(
        False,
        "A clean stop (SIGTERM, Ctrl-C) leaves running pods running, for the next server on the "
        "same data directory to adopt: an upgrade without stopping the work (the Kubernetes "
        "and Slurm executors' work always runs on).",
        takes={"local": "pods_outlive_executor"},
    )
    kubeconfig: Path | None = option(
        None,
        "The cluster (default: KUBECONFIG, then ~/.kube/config).",
        executor="kubernetes",
        keyword="kubeconfig",
    )
    node_selector: str = option(
        "",
        "The nodes topoq places on (a label selector).",
        executor="kubernetes",
        keyword="node_selector",
    )
    namespace_pattern: str = option(
        "{team}",
        "Each team's namespace ({team} is its name).",
        executor="kubernetes",
        keyword="namespace_pattern",
    )
    kube_qps: float = option(
        50.0,
        "Requests a second to the API server, on average.",
        executor="kubernetes",
        keyword="qps",
    )
    kube_burst: int = option(
        100, "Requests at once, at most.", executor="kubernetes", keyword="burst"
    )
    kube_concurrency: int = option(
        8,
        "Connections that make and delete objects at once.",
        executor="kubernetes",
        keyword="concurrency",
    )
    cluster_jobs: bool = option(
        True,
        "Take in the cluster's suspended Jobs that name a team's queue "
        "(kueue.x-k8s.io/queue-name; docs/executors.md).",
        executor="kubernetes",
        keyword="cluster_jobs",
    )
    slurm_conf: Path | None = option(
        None,
        "The cluster's slurm.conf (default: SLURM_CONF); its topology.conf beside it gives the "
        "switches.",
        executor="slurm",
        keyword="slurm_conf",
    )
    slurm_partition: str = option(
        "topoq", "The partition topoq owns and submits to.", executor="slurm", keyword="partition"
    )
    write_topology: bool = option(
        False,
        "Keep topology.conf in step with topoq's nodes: write it when a node topoq knows is "
        "missing from it, check it with Slurm, then `scontrol reconfigure` (docs/executors.md).",
        executor="slurm",
        keyword="write_topology",
    )
    log_format: str = option(
        "text",
        "The server log on stderr: text (one readable line per event) or json (one object per "
        "line); every process of the server writes it (docs/operations.md lists the events).",
        choices=LOG_FORMATS,
    )
    log_level: str = option("info", "The least severe records the log keeps.", choices=LOG_LEVELS)
    access_log: bool = option(
        False,
        "Also log one line per HTTP request: method, path, status, duration and the token's "
        "name (never the token).",
    )

    def __post_init__(self) -> None:
        if not 0 <= self.port <= 65535:
            raise InvalidInputError(
                f"{self.port} is not a port", where="--port", hint="give 0 to 65535 (0: any free)"
            )
        self._check_process_counts()
        if self.write_topology and (self.executor != "slurm" or self.cluster_file is None):
            raise InvalidInputError(
                "--write-topology writes topoq's view of the network (its --cluster file) "
                "into a Slurm cluster's topology.conf",
                where="--write-topology",
                hint="give it with --executor slurm and --cluster FILE (any format `topoq "
                "place` reads); without --cluster topoq reads topology.conf and has nothing "
                "to write back",
            )
        if not 0.05 <= self.step_interval_s <= 60:  # NaN too
            raise InvalidInputError(
                f"{self.step_interval_s} s between steps is out of range",
                where="--step-interval",
                hint="give 0.05 to 60 seconds (default 0.5)",
            )
        for flag, rate in (
            ("--kube-qps", self.kube_qps),
            ("--kube-burst", self.kube_burst),
            ("--kube-concurrency", self.kube_concurrency),
        ):
            if not rate > 0:  # NaN too
                raise InvalidInputError(
                    f"must be above 0, not {rate}",
                    where=flag,
                    hint="client-go's defaults are 5 a second, bursts of 10; topoq's 50, 100 and 8",
                )
        for name, found in options():
            flag = found.flag_of(name)
            foreign = found.executor and self.executor != found.executor
            if foreign and getattr(self, name) != DEFAULTS[name]:
                raise InvalidInputError(
                    f"{flag} is for --executor {found.executor}; this server runs "
                    f"--executor {self.executor}",
                    where=flag,
                    hint=f"add --executor {found.executor}, or leave {flag} out",
                )
            if found.choices and getattr(self, name) not in found.choices:
                raise InvalidInputError(
                    f"{getattr(self, name)!r} is not one of {', '.join(found.choices)}",
                    where=found.flag_of(name),
                    hint=f"give one of: {', '.join(found.choices)}",
                )

    def _check_process_counts(self) -> None:
        for flag, count in (("--api-workers", self.api_workers), ("--api-spares", self.api_spares)):
            if count > MAX_API_PROCESSES:
                raise InvalidInputError(
                    f"{flag} {count} is more processes than a server starts",
                    where=flag,
                    hint=f"give at most {MAX_API_PROCESSES}",
                )
        if self.api_workers < 1:
            raise InvalidInputError(
                f"--api-workers {self.api_workers} serves nothing",
                where="--api-workers",
                hint="give 1 or more",
            )
        if self.api_spares < 0:
            raise InvalidInputError(
                f"--api-spares {self.api_spares} is not a number of processes",
                where="--api-spares",
                hint="give 0 (a dead API process is replaced by a cold start) or more",
            )

    def executor_options(self) -> dict[str, Any]:
        """What the executor's factory takes from these settings, by keyword."""
        return {
            found.takes[self.executor]: getattr(self, name)
            for name, found in options()
            if self.executor in found.takes
        }

    def command_line(self) -> list[str]:
        """The options that say these settings (all but the private ones, and those at their
        default) on a command line that ``argument_parser`` reads: the API processes'."""
        words: list[str] = []
        for name, found in options():
            value = getattr(self, name)
            if found.private or value == DEFAULTS[name]:
                continue
            flag = found.flag_of(name)
            if isinstance(value, bool):
                words.append(flag if value else "--no-" + flag[2:])
            else:
                words += [flag, found.show(value)]
        return words


def options() -> Iterator[tuple[str, Option]]:
    """Every settings field's name and option, in order."""
    for each in dataclasses.fields(ServerSettings):
        yield each.name, each.metadata["option"]


DEFAULTS: Mapping[str, Any] = MappingProxyType(
    {each.name: each.default for each in dataclasses.fields(ServerSettings)}
)


def command_line_type(name: str) -> tuple[type, bool]:
    """The type an option's text is read as (``str`` when the field parses it), and whether
    it may be left out (None)."""
    if dict(options())[name].parse is not None:
        return str, True
    hint = typing.get_type_hints(ServerSettings)[name]
    if isinstance(hint, UnionType):
        (inner,) = (arg for arg in typing.get_args(hint) if arg is not NoneType)
        return inner, True
    return hint, False


def settings_from(values: Mapping[str, Any]) -> ServerSettings:
    """Settings from an option's values by field name, as a command line gave them (text where
    the field parses it; None or absent: the default)."""
    made: dict[str, Any] = {}
    for name, found in options():
        value = values.get(name)
        if value is None:
            continue
        if found.parse is not None and isinstance(value, str):
            value = found.parse(value)
        elif isinstance(value, Path):
            value = value.expanduser()
        made[name] = value
    return ServerSettings(**made)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every settings option on ``parser`` (each value None when not given)."""
    for name, found in options():
        kind, _ = command_line_type(name)
        default = found.text_default or DEFAULTS[name]
        help_text = found.help_text() + (
            f" (default: {default})" if default not in ("", ()) else ""
        )
        if kind is bool:
            parser.add_argument(
                found.flag_of(name),
                dest=name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_text,
            )
        else:
            parser.add_argument(
                found.flag_of(name),
                dest=name,
                type=kind,
                default=None,
                metavar="{" + ",".join(found.choices) + "}" if found.choices else None,
                help=help_text.replace("%", "%%"),
            )
