"""``topoq logs``: one bounded read of a job's output, or following it to the job's end.

Following reads each pod forward from its stream offset (bytes since the pod's first, which a
rotation of its log does not move), so every line of every pod is printed once, in order per
pod. With several pods each line is prefixed by its pod (``[pod 3] ``); only whole lines are
printed while the job runs (a line's start waits for its newline, or for its attempt's end).
When the job was requeued, the rest of the attempt is read, a line says so
(``--- attempt 2 started (the job was requeued) ---``) and the new attempt is followed from
its start. It ends once the job has ended and every pod's output is read. A follower that
falls behind by more than a pod's log keeps (its limit) says on standard error how many bytes
it missed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import typer

from topoq.client import ClientError, TopoqClient
from topoq.domain.errors import InvalidInputError
from topoq.wire.v1 import JobLogs

FINISHED = frozenset({"succeeded", "failed", "cancelled"})
WAITING = frozenset({"pending", "admitted"})
FOLLOW_INTERVAL_S = 0.5
_MISSES_OF_A_STARTED_JOB = 10
"""How many times a running job may answer that it has no logs (its files not made yet)
before following gives up: a server whose executor keeps none."""
_READS_PER_POD_PER_ROUND = 16
"""A pod that writes faster than reads return is left for the next round after this many, so
that the other pods' lines keep coming."""


@dataclass(frozen=True)
class LogOptions:
    """What ``topoq logs`` was asked for."""

    pod: int | None = None
    attempt: int | None = None
    tail_lines: int | None = None
    tail_bytes: int | None = None
    since: str | None = None
    offset: int | None = None
    limit_bytes: int | None = None

    def checked(self, *, follow: bool) -> LogOptions:
        """These options, or ``InvalidInputError`` naming the one that cannot be used."""
        if self.tail_lines is not None and self.tail_lines < 1:
            raise InvalidInputError(
                f"{self.tail_lines} lines show nothing", where="--tail", hint="give 1 or more"
            )
        if self.attempt is not None and self.attempt < 1:
            raise InvalidInputError(
                "attempts count from 1", where="--attempt", hint="give 1 or more"
            )
        if follow and self.offset is not None:
            raise InvalidInputError(
                "--follow reads every pod from where it starts",
                where="--offset",
                hint="use --offset without --follow, or --tail/--since/--tail-bytes with it",
            )
        since = self.since
        if since is not None and since.strip().isdecimal():
            since = f"{since.strip()}s"  # a bare number is seconds ago here, as kubectl reads it
        return LogOptions(
            self.pod,
            self.attempt,
            self.tail_lines,
            self.tail_bytes,
            since,
            self.offset,
            self.limit_bytes,
        )


def print_logs(client: TopoqClient, job: str, options: LogOptions) -> None:
    """Print one bounded read of the job's output; say on standard error when it was cut."""
    asked = {name: value for name, value in asdict(options).items() if name != "pod"}
    read = client.logs(job, options.pod, **asked)
    print(read.text, end="", flush=True)
    forward = options.offset is not None or (
        options.since is not None and options.tail_lines is None
    )
    if not read.truncated or (options.tail_lines is not None):
        return
    if forward and len(read.pods) == 1:
        (only,) = read.pods
        attempt = f" --attempt {read.attempt}" if read.attempt != read.latest_attempt else ""
        typer.echo(
            f"(more follows: --pod {only.pod} --offset {only.next_offset}{attempt})", err=True
        )
    elif forward:
        typer.echo("(cut at the byte limit: --pod and --offset to page)", err=True)
    else:
        typer.echo("(the start was left out: --tail-bytes for more, --offset to page)", err=True)


@dataclass
class PodLines:
    """One pod's output as it arrives, cut into whole lines."""

    rest: str = ""

    def whole_lines(self, text: str) -> list[str]:
        """The lines ``text`` completes (each with its newline; a line is what ends in
        ``\\n``, so a carriage return stays inside its line); the unfinished end waits."""
        *lines, self.rest = (self.rest + text).split("\n")
        return [line + "\n" for line in lines]

    def unfinished(self) -> list[str]:
        """The line still waiting for its newline, ended (its pod wrote nothing more)."""
        rest, self.rest = self.rest, ""
        return [rest + "\n"] if rest else []


@dataclass
class _AttemptReader:
    """Follows every pod of one attempt: where each was read to and its unfinished line."""

    client: TopoqClient
    job: str
    attempt: int
    ranks: list[int]
    prefixed: bool
    write: Callable[[str], None]
    offsets: dict[int, int] = field(default_factory=dict)
    lines: dict[int, PodLines] = field(default_factory=dict)
    latest_seen: int = 0

    def start(self, options: LogOptions) -> None:
        """Print each pod's first read: the last lines or bytes, or since a time (forward),
        or everything kept; then follow on from there."""
        for rank in self.ranks:
            if options.tail_lines is None and options.tail_bytes is None and options.since is None:
                self.offsets[rank] = 0
                continue
            read = self.client.logs(
                self.job,
                rank,
                attempt=self.attempt,
                tail_lines=options.tail_lines,
                tail_bytes=options.tail_bytes,
                since=options.since,
            )
            self._show(rank, read, asked=None)

    def read_round(self, *, complete: bool) -> None:
        """Read what every pod added; ``complete``: all of it (the pods have ended)."""
        for rank in self.ranks:
            for _ in range(_READS_PER_POD_PER_ROUND if not complete else 1 << 30):
                asked = self.offsets.get(rank, 0)
                read = self.client.logs(self.job, rank, attempt=self.attempt, offset=asked)
                more = self._show(rank, read, asked=asked)
                if not more:
                    break

    def finish(self) -> None:
        """The attempt has ended: print every pod's unfinished line."""
        for rank in self.ranks:
            self._print(rank, self.lines.setdefault(rank, PodLines()).unfinished())

    def _show(self, rank: int, read: JobLogs, asked: int | None) -> bool:
        """Print what ``read`` completes of the pod's lines; whether more is there to read."""
        self.latest_seen = max(self.latest_seen, read.latest_attempt)
        (pod,) = read.pods
        if asked is not None and pod.offset > asked:
            typer.echo(
                f"(pod {rank}: {pod.offset - asked} bytes were rotated away before they were read)",
                err=True,
            )
        self.offsets[rank] = pod.next_offset
        text = read.text
        self._print(rank, self.lines.setdefault(rank, PodLines()).whole_lines(text))
        return bool(text) and pod.next_offset < pod.size_bytes

    def _print(self, rank: int, lines: list[str]) -> None:
        if lines:
            prefix = f"[pod {rank}] " if self.prefixed else ""
            self.write("".join(prefix + line for line in lines))


def follow_logs(
    client: TopoqClient,
    job: str,
    options: LogOptions,
    *,
    interval_s: float = FOLLOW_INTERVAL_S,
    write: Callable[[str], None] | None = None,
) -> None:
    """Print the job's output as its pods write it until the job ends (see the module)."""
    out = write or _stdout
    probe = _first_probe(client, job, options.attempt, interval_s)
    reader = _attempt_reader(client, job, probe, options.pod, out)
    reader.start(options)
    while True:
        finished = client.job(job).phase.value in FINISHED
        reader.read_round(complete=finished)
        if reader.latest_seen > reader.attempt and not finished:
            reader.read_round(complete=True)  # its pods ended before the next attempt began
        if reader.latest_seen > reader.attempt:
            reader.finish()
            number = reader.attempt + 1
            probe = _next_probe(client, job, number, reader.latest_seen)
            out(f"--- attempt {probe.attempt} started (the job was requeued) ---\n")
            reader = _attempt_reader(client, job, probe, options.pod, out)
            continue
        if finished:
            reader.finish()
            return
        time.sleep(interval_s)


def _attempt_reader(
    client: TopoqClient, job: str, probe: JobLogs, pod: int | None, out: Callable[[str], None]
) -> _AttemptReader:
    ranks = [pod] if pod is not None else [p.pod for p in probe.pods]
    reader = _AttemptReader(client, job, probe.attempt, ranks, len(ranks) > 1, out)
    reader.latest_seen = probe.latest_attempt
    return reader


def _first_probe(client: TopoqClient, job: str, attempt: int | None, interval_s: float) -> JobLogs:
    """The attempt to follow and its pods, once the job has logs: it may still wait, or have
    just started (its first files a moment away)."""
    misses = 0
    while True:
        try:
            return client.logs(job, attempt=attempt, tail_bytes=1)
        except ClientError as error:
            phase = client.job(job).phase.value
            misses += phase not in WAITING
            if error.status != 404 or phase in FINISHED or misses > _MISSES_OF_A_STARTED_JOB:
                raise
        time.sleep(interval_s)


def _next_probe(client: TopoqClient, job: str, number: int, latest: int) -> JobLogs:
    """Attempt ``number``'s pods, or those of the first later one with logs (an attempt
    that failed to start leaves none)."""
    while True:
        try:
            return client.logs(job, attempt=number, tail_bytes=1)
        except ClientError as error:
            if error.status != 422 or number >= latest:
                raise
        number += 1


def _stdout(text: str) -> None:
    print(text, end="", flush=True)
