"""The ``topoq`` command. Heavy modules are imported inside each command, so start-up stays fast
(docs/cli.md, Start-up; ``benchmarks/startup.py``)."""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from topoq.cli.common import EXIT_BAD_INPUT, TokenOption, guarded, one_line
from topoq.cli.output import Output, OutputOption, print_as

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
"""numpy's OpenBLAS starts a thread per core when it is imported, and their start costs a verb
that places ~0.1 s of CPU; topoq does no linear algebra (placement sums and compares arrays),
so one thread is all it uses. Set here, before any verb imports numpy; a value the user set
stays."""
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
"""pydantic looks for plugins among every installed package's entry points when it first
validates (~4 ms of a verb that reads an answer); topoq uses none. A value the user set
stays (an empty one lets pydantic load its plugins)."""


class QuietPipeGroup(TyperGroup):
    """The ``topoq`` group: a reader that closes standard output early (``topoq place … |
    head``) ends the verb quietly with exit 0, as a Unix filter does, instead of click's
    exit 1. A bad command line is one line on standard error (``cli.errors``)."""

    def make_context(self, *args: Any, **extra: Any) -> Any:
        from topoq.cli.errors import one_line_usage_errors

        with one_line_usage_errors():
            return super().make_context(*args, **extra)

    def invoke(self, ctx: Any) -> Any:  # typer's vendored click Context
        from topoq.cli.errors import one_line_usage_errors

        try:
            with one_line_usage_errors():
                return super().invoke(ctx)
        except BrokenPipeError:
            _quiet_stdout()
            raise typer.Exit(0) from None


def _quiet_stdout() -> None:
    """Point standard output at /dev/null, so that flushing what is left of it at exit does
    not fail again on the closed pipe."""

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _root() -> typer.Typer:
    return typer.Typer(
        cls=QuietPipeGroup,
        name="topoq",
        help="Topology-aware gang placement and governance for shared GPU clusters.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        add_completion=False,
    )


app = _root()
"""Every verb and group of topoq (``--help`` lists them; tests walk them)."""


def _register_command_groups() -> None:
    """One module per command group (docs/cli.md); ``--help`` lists their verbs in this order,
    then ``simulate``, ``demo`` and ``version`` (below), then the groups."""
    from topoq.cli import (
        access_app,
        cluster_app,
        dev_app,
        jobs_app,
        nodes_app,
        policy_app,
        report_app,
        server_app,
        topology_app,
    )

    server_app.register(app)
    jobs_app.register(app)
    nodes_app.register(app)
    cluster_app.register(app)
    access_app.register(app)
    topology_app.register(app)
    policy_app.register(app)
    report_app.register(app)
    dev_app.register(app)


_register_command_groups()


class SimulateOutput(StrEnum):
    TABLE = "table"
    JSON = "json"
    JSONL = "jsonl"


class TraceFormatOption(StrEnum):
    PHILLY = "philly"
    ITP = "itp"
    OPENB = "openb"
    TOPOQ = "topoq"


class PlacementOption(StrEnum):
    """``topoq.core.cycle.PlacementMode``'s values (not imported: ``--help`` starts fast)."""

    TOPOQ = "topoq"
    KUEUE_LIKE = "kueue-like"
    FIRST_FIT = "first-fit"


class QueueOrderOption(StrEnum):
    """``topoq.domain.governance.QueueOrder``'s values (not imported: ``--help`` starts
    fast)."""

    SUBMISSION = "submission"
    SHORTEST_FIRST = "shortest-first"


@app.command()
def simulate(
    scenario: Annotated[
        Path | None,
        typer.Argument(
            help="A scenario file (kind: Scenario): cluster, policy and events. Or give "
            "--trace instead.",
            show_default=False,
        ),
    ] = None,
    trace: Annotated[
        Path | None,
        typer.Option(
            "--trace",
            help="A GPU-cluster trace to replay (Philly 2017, Microsoft ITP 2021, an Alibaba "
            "openb 2023 pod list, or your own in topoq's format: job_id,team,submitted_s,"
            "duration_s,gpus; CSV, plain or .gz): its jobs arrive as recorded, each a gang "
            "of whole nodes.",
            show_default=False,
        ),
    ] = None,
    trace_format: Annotated[
        TraceFormatOption | None,
        typer.Option(
            "--trace-format",
            help="The trace's format (default: told by its header).",
            show_default=False,
        ),
    ] = None,
    cluster: Annotated[
        Path | None,
        typer.Option(
            "--cluster",
            help="With --trace: the cluster to replay it on (default: derived from the trace).",
            show_default=False,
        ),
    ] = None,
    policy: Annotated[
        list[Path] | None,
        typer.Option(
            "--policy",
            help="With --trace: the policy file (default: derived from the trace's teams). "
            "Give it twice or more to replay the trace under each and compare them in one "
            "table.",
            show_default=False,
        ),
    ] = None,
    jobs: Annotated[
        int,
        typer.Option(
            "--jobs",
            min=1,
            max=64,
            help="With several --policy: how many replays run at once, each in a process.",
        ),
    ] = 1,
    limit: Annotated[
        int | None,
        typer.Option(
            "--limit",
            min=1,
            help="With --trace: replay only its first N jobs by arrival.",
            show_default=False,
        ),
    ] = None,
    time_limit_factor: Annotated[
        float | None,
        typer.Option(
            "--time-limit-factor",
            min=1.0,
            max=1000.0,
            help="With --trace: give each job a time limit of its duration times this (the "
            "traces record none), so that expected starts and backfill work.",
            show_default=False,
        ),
    ] = None,
    log: Annotated[
        Path | None,
        typer.Option(
            "--log",
            help="Also write the decision log (JSON lines) to this file.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        SimulateOutput,
        typer.Option(
            "--output",
            "-o",
            help="table (summary per team), json (summary) or jsonl (the decision log).",
        ),
    ] = SimulateOutput.TABLE,
    placement: Annotated[
        list[PlacementOption] | None,
        typer.Option(
            "--placement",
            help="How gangs are placed: topoq (default), kueue-like (the same placement, "
            "nothing held for waiting jobs, victims over the whole cluster) or first-fit "
            "(topology-oblivious). Give it twice or more with --trace to compare them.",
            show_default=False,
        ),
    ] = None,
    queue_order: Annotated[
        list[QueueOrderOption] | None,
        typer.Option(
            "--queue-order",
            help="With --trace: the order of jobs of one priority, in place of the policy's "
            "queueOrder: submission or shortest-first (the shortest time limit first; give "
            "--time-limit-factor too, the traces record none). Give it twice to compare them.",
            show_default=False,
        ),
    ] = None,
    cost_model: Annotated[
        bool | None,
        typer.Option(
            "--cost-model/--no-cost-model",
            help="Slow a gang's run by how it is spread and by other jobs' traffic "
            "(docs/simulate.md). Default: on for --trace, off for a scenario.",
            show_default=False,
        ),
    ] = None,
    network: Annotated[
        Path | None,
        typer.Option(
            "--network",
            help="The cost model's bandwidths, latencies and oversubscription (YAML); "
            "implies --cost-model.",
            show_default=False,
        ),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Also write an HTML report with plots (waits, utilisation, queue, GPUs by "
            "team, slow-down) to DIR/report.html; DIR is made if missing.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Run a scenario, or replay a real trace, through the scheduler on a virtual clock: the
    decisions and a summary per team (GPU-hours in guarantee and borrowed, waits,
    preemptions)."""
    from topoq.cli.simulate_command import TraceRequest, run_simulate

    chosen = None if trace_format is None else trace_format.value
    placements = tuple(mode.value for mode in placement or ())
    request = TraceRequest(
        trace,
        chosen,
        cluster,
        tuple(policy or ()),
        limit,
        jobs,
        placements,
        cost_model,
        network,
        time_limit_factor=time_limit_factor,
        queue_orders=tuple(order.value for order in queue_order or ()),
    )
    guarded(lambda: run_simulate(scenario, log, output.value, request, report))


class WhatIfOutput(StrEnum):
    TABLE = "table"
    JSON = "json"


@app.command()
def whatif(
    since: Annotated[
        str,
        typer.Option(
            "--since",
            help="The window's start: an ISO 8601 time (UTC when it names no zone) or epoch "
            "seconds. The jobs submitted in [since, until) are replayed.",
            show_default=False,
        ),
    ],
    until: Annotated[
        str,
        typer.Option("--until", help="The window's end, not included.", show_default=False),
    ],
    policy: Annotated[
        Path,
        typer.Option(
            "--policy",
            help="The changed policy file, replayed beside the policy in force at --since.",
            show_default=False,
        ),
    ],
    database: Annotated[
        str | None,
        typer.Option(
            "--database",
            help="The server's database: sqlite:///DATA_DIR/topoq.db or postgresql://… "
            "(read only: nothing is written or migrated). Or give --server.",
            show_default=False,
        ),
    ] = None,
    topology_levels: Annotated[
        str | None,
        typer.Option(
            "--topology-levels",
            help="Node labels of the levels the server placed by, broadest first, "
            "comma-separated (default: the AWS network layers the stored nodes carry, then "
            "the hostname).",
            show_default=False,
        ),
    ] = None,
    report: Annotated[
        Path | None,
        typer.Option(
            "--report",
            help="Also write the HTML report of the three runs to DIR/report.html; DIR is "
            "made if missing.",
            show_default=False,
        ),
    ] = None,
    output: Annotated[
        WhatIfOutput,
        typer.Option("--output", "-o", help="table, or json (the figures of each run)."),
    ] = WhatIfOutput.TABLE,
    server: Annotated[
        str | None,
        typer.Option(
            "--server",
            help="Read the history from a running server instead of its database (an admin "
            "token: --token, TOPOQ_TOKEN, …).",
            show_default=False,
        ),
    ] = None,
    token: TokenOption = None,
) -> None:
    """Replay the jobs a server recorded in a window under the policy then in force and under
    a changed one, beside what was recorded: per team, what would have been different (waits,
    GPU-hours, preemptions)."""
    from topoq.cli.whatif_command import WhatIfRequest, run_whatif

    levels = tuple(part.strip() for part in (topology_levels or "").split(",") if part.strip())
    request = WhatIfRequest(
        database, since, until, policy, levels, report, output.value, server, token
    )
    guarded(lambda: run_whatif(request))


@app.command()
def demo(
    quick: Annotated[
        bool, typer.Option("--quick", help="The same story with short sleeps (for CI): ≤ 30 s.")
    ] = False,
    keep_running: Annotated[
        bool,
        typer.Option("--keep-running", help="Leave the server up at the end, until Ctrl-C."),
    ] = False,
    offline: Annotated[
        bool,
        typer.Option(
            "--offline", help="No server: place a few jobs on the example cluster and say why."
        ),
    ] = False,
    data_dir: Annotated[
        Path | None,
        typer.Option(
            help="A new or empty directory for the store, token and logs (kept).",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            min=1, max=65535, help="The server's port (default: a free one).", show_default=False
        ),
    ] = None,
    executor: Annotated[
        str,
        typer.Option(
            help="local (each pod a process here), kubernetes (each pod a Pod: on "
            "--kubeconfig's cluster, else on a 64-node test bed brought up from "
            "TOPOQ_K8S_ASSETS) or slurm (each gang a Slurm job on a 64-node Slurm cluster "
            "brought up here: root, and Debian's slurmctld slurmd slurm-client munge)."
        ),
    ] = "local",
    kubeconfig: Annotated[
        Path | None,
        typer.Option(
            help="With --executor kubernetes: the cluster to play on (64 nodes of 8 GPUs "
            "under 2 spines × 4 blocks, as the demo cluster).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Start a server on a 512-GPU virtual cluster with three teams and real pods, and play a
    story: borrowing, reclaim, priority preemption, a gang waiting for a block, a node failure."""
    if offline:
        from topoq.cli.demo import run_offline_demo

        guarded(run_offline_demo)
        return
    from topoq.cli.demo import DemoOptions, run_demo

    codes: list[int] = []
    options = DemoOptions(
        quick,
        keep_running,
        data_dir,
        port,
        executor,
        kubeconfig.resolve() if kubeconfig is not None else None,
    )
    guarded(lambda: codes.append(run_demo(options)))
    raise typer.Exit(codes[0] if codes else EXIT_BAD_INPUT)


@app.command()
def version(output: OutputOption = Output.TABLE) -> None:
    """Print topoq's version (-o json: {"version": …})."""
    from topoq import __version__

    print_as(output, {"version": __version__}, lambda: __version__)


def only_the_invoked(arguments: Sequence[str]) -> typer.Typer:
    """The command to run for ``arguments``: the verb or group they name alone, or all of
    topoq when they name none of them (``--help``, a typo, for the suggestions). Typer builds
    the click command of every verb it holds before it parses the command line — ~45 ms of a
    verb's start-up for topoq's 44 verbs, ~1 ms for one (docs/adr/0010-cli-start-up.md)."""
    from typer.main import get_command_name

    named = next((word for word in arguments if not word.startswith("-")), None)
    commands = [
        command
        for command in app.registered_commands
        if named == (command.name or get_command_name(command.callback.__name__))  # type: ignore[union-attr]
    ]
    groups = [group for group in app.registered_groups if group.name == named]
    if not commands and not groups:
        return app
    one = _root()
    one.registered_commands, one.registered_groups = commands, groups
    one.callback()(_no_options)  # a group even for one verb (Typer would make it the root)
    return one


def _no_options() -> None:
    pass  # the root takes no options of its own; its help is the Typer's (``_root``)


def main() -> None:
    from topoq.domain.errors import TopoqError

    try:
        only_the_invoked(sys.argv[1:])()
    except SystemExit as done:
        _flush_stdout()
        raise done from None
    except KeyboardInterrupt:  # pragma: no cover - interactive only
        sys.exit(130)
    except TopoqError as error:  # one a verb did not catch itself: still one line
        typer.echo(f"error: {one_line(str(error))}", err=True)
        sys.exit(EXIT_BAD_INPUT)
    except OSError as error:  # a file named on the command line that cannot be read or written
        from topoq.cli.errors import os_error_line

        typer.echo(f"error: {os_error_line(error)}", err=True)
        sys.exit(EXIT_BAD_INPUT)


def _flush_stdout() -> None:
    """Write what is left of standard output now; a reader gone already (``| head``) is
    no error: the rest goes to /dev/null."""
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        _quiet_stdout()
