"""The stage the demo's story plays on: a client of the demo server, the console, the pace, and
what each scene expected but did not see.

Every wait polls the server until a deadline; nothing waits on a fixed sleep alone. A scene
that does not see what it expects says so in one line and stops; the story goes on with the
next scene."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from rich.console import Console
from rich.table import Table

from topoq.cli.demo.jobs import DemoJob
from topoq.cli.server_commands import jobs_table
from topoq.client import ClientError, TopoqClient
from topoq.domain.gpu_share import gpu_number
from topoq.wire.v1 import JobDetail, PhaseChangeModel

POLL_INTERVAL_S = 0.25


@dataclass(frozen=True)
class Pace:
    """How long things take: ``quick`` for CI, ``default`` for a person reading along."""

    name: str
    pause_s: float
    """A pause after each scene, to read it (and try the CLI)."""
    serving_s: float
    """How long the inference replicas of scene 4 run: the block gang waits that long."""
    gang_s: float
    """How long the block gang runs (scene 5 restarts it from zero)."""
    small_s: float
    """How long the small jobs that backfill in scene 4 run."""
    filler_s: float
    """The jobs of scenes 1-3 run until the intermission cancels them."""
    deadline_s: float
    """How long a scene waits for what it expects before it says it did not happen."""


DEFAULT_PACE = Pace(
    "default", pause_s=4, serving_s=20, gang_s=20, small_s=6, filler_s=600, deadline_s=60
)
QUICK_PACE = Pace("quick", pause_s=0, serving_s=4, gang_s=4, small_s=2, filler_s=300, deadline_s=20)


class SceneStopped(Exception):
    """A scene cannot go on: what it expected did not happen (already said on the console)."""


@dataclass
class Stage:
    client: TopoqClient
    console: Console
    pace: Pace
    misses: list[str] = field(default_factory=list)
    """What the current scene expected and did not see."""
    pods_print: bool = True
    """The pods' output can be read through topoq (the local executor's pods print their
    rank and topology); else where a job runs is read from its placement."""

    # --- narration ----------------------------------------------------------------------
    def say(self, text: str, style: str | None = None) -> None:
        """One line, printed as is (server text may hold brackets; long lines do not wrap)."""
        self.console.print(text, style=style, markup=False, highlight=False, soft_wrap=True)

    def note(self, text: str) -> None:
        self.say(f"  {text}", style="dim")

    def evidence(self, text: str) -> None:
        self.say(f"  » {text}", style="cyan")

    def miss(self, text: str) -> None:
        self.misses.append(text)
        self.say(f"  ✗ {text}", style="bold red")

    def pause(self) -> None:
        if self.pace.pause_s > 0:
            time.sleep(self.pace.pause_s)

    # --- actions ------------------------------------------------------------------------
    def submit(self, job: DemoJob) -> None:
        try:
            self.client.submit(job.request())
        except ClientError as error:
            self.miss(f"could not submit {job.name}: {error}")
            raise SceneStopped(job.name) from None
        self.say(f"  + {job.name}: {job.describe()}")

    def expect(self, what: str, check: Callable[[], bool], timeout_s: float | None = None) -> None:
        """Poll ``check`` until it holds. Past the deadline the miss is said and the scene
        stops; an unreachable server stops it at once (an error answer is retried)."""
        limit_s = self.pace.deadline_s if timeout_s is None else timeout_s
        started = time.monotonic()
        last_error: ClientError | None = None
        while True:
            try:
                if check():
                    return
                last_error = None
            except ClientError as error:
                if error.status is None:
                    raise
                last_error = error
            if time.monotonic() - started > limit_s:
                detail = f" (last error: {last_error})" if last_error else ""
                self.miss(f"expected {what}, but it did not happen within {limit_s:g} s{detail}")
                raise SceneStopped(what)
            time.sleep(POLL_INTERVAL_S)

    # --- reading the server -------------------------------------------------------------
    def phase(self, job: str) -> str:
        return self.client.job(job).phase.value

    def running(self, *jobs: str) -> bool:
        return all(self.phase(job) == "running" for job in jobs)

    def reason(self, job: str) -> str | None:
        return self.client.explain(job).reason

    def change_caused(self, job: str, cause: str) -> PhaseChangeModel | None:
        """The job's latest phase change whose cause starts with ``cause``."""
        history = self.client.history(job).history
        return next(
            (change for change in reversed(history) if change.cause.startswith(cause)), None
        )

    def first_with_cause(self, jobs: Iterable[str], cause: str) -> str | None:
        return next((job for job in jobs if self.change_caused(job, cause) is not None), None)

    # --- evidence -----------------------------------------------------------------------
    def show_jobs(self, jobs: Iterable[str] | None = None) -> None:
        """The jobs as `topoq list` prints them (only ``jobs``, when given)."""
        wanted = set(jobs) if jobs is not None else None
        rows = [
            row for row in self.client.jobs(limit=500).items if wanted is None or row.id in wanted
        ]
        self.console.print(jobs_table(rows), markup=False, highlight=False)

    def show_explain(self, job: str) -> None:
        """What `topoq explain JOB` prints."""
        answer = self.client.explain(job)
        headline = f"{answer.job}: {answer.phase.value}"
        self.evidence(headline + (f" — {answer.reason}" if answer.reason else ""))
        self.say(f"      {answer.message}")
        for remedy in answer.remedies:
            self.say(f"      would change it: {remedy}", style="dim")

    def show_change(self, job: str, change: PhaseChangeModel) -> None:
        self.evidence(f"{job}: {change.phase.value} — {change.cause}")

    def show_teams(self) -> None:
        """GPUs per team, as `topoq teams` prints them."""
        table = Table(box=None, header_style="bold")
        for column in ("TEAM", "GUARANTEE", "USED", "BORROWED", "LENT"):
            table.add_column(column, justify="left" if column == "TEAM" else "right")
        for team in self.client.teams():
            for flavor in team.flavors:
                table.add_row(
                    team.name,
                    str(flavor.guarantee_gpus),
                    str(flavor.used_gpus),
                    str(flavor.borrowed_gpus),
                    str(flavor.lent_gpus),
                )
        self.console.print(table)

    def team_gpus(self, team: str) -> tuple[int | float, int | float, int | float]:
        """The team's (used, borrowed, lent) GPUs."""
        for found in self.client.teams():
            if found.name == team:
                flavors = found.flavors
                return (
                    gpu_number(sum((flavor.used_gpus for flavor in flavors), 0.0)),
                    gpu_number(sum((flavor.borrowed_gpus for flavor in flavors), 0.0)),
                    gpu_number(sum((flavor.lent_gpus for flavor in flavors), 0.0)),
                )
        return (0, 0, 0)


def block_of(job: JobDetail, levels: tuple[str, str]) -> str | None:
    """``l1-01/l2-01-02``: the spine/block the job runs in, when it runs in exactly one."""
    if job.allocation is None:
        return None
    blocks = {
        "/".join(assignment.domain.get(level, "?") for level in levels)
        for assignment in job.allocation.assignments
    }
    return blocks.pop() if len(blocks) == 1 else None
