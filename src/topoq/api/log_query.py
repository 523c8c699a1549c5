"""What a ``GET /jobs/{id}/logs`` asks for, checked: which attempt and pod, and one of four
reads (the tail in bytes or lines, a forward read from an offset, or what was written since a
time), each capped in bytes."""

from __future__ import annotations

from dataclasses import dataclass

from topoq.api.errors import ApiError
from topoq.api.routes_reports import parse_time
from topoq.domain.durations import duration_s
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobView
from topoq.domain.limits import DEFAULT_LOG_READ_BYTES
from topoq.engine.ports import LogRequest

SINCE_HINT = (
    "give a duration before now (90s, 10m, 2h, 1h30m), an ISO time (2026-12-03T09:00:00Z, "
    "UTC when it names no zone) or seconds since the epoch"
)


@dataclass(frozen=True)
class LogQuery:
    pod: int | None = None
    tail_bytes: int | None = None
    offset: int | None = None
    limit_bytes: int | None = None
    attempt: int | None = None
    tail_lines: int | None = None
    since: str | None = None

    @property
    def forward(self) -> bool:
        """Whether it reads forward (from an offset, or since a time without a line count)."""
        return self.offset is not None or (self.since is not None and self.tail_lines is None)


def log_request(view: JobView, query: LogQuery, now_s: float) -> LogRequest:
    """The read ``query`` asks for of ``view``'s logs; 422 naming the parameter otherwise."""
    pods = view.spec.workload.total_pods
    if query.pod is not None and query.pod >= pods:
        raise ApiError(
            422,
            f"pod {query.pod} does not exist",
            where="pod",
            hint=f"the job has pods 0 to {pods - 1}",
        )
    _check_combination(query)
    limit = (query.limit_bytes if query.forward else query.tail_bytes) or DEFAULT_LOG_READ_BYTES
    return LogRequest(
        view.team,
        view.id,
        pod=query.pod,
        offset=query.offset,
        limit_bytes=limit,
        attempt=query.attempt,
        tail_lines=query.tail_lines,
        since_s=None if query.since is None else since_s(query.since, now_s),
    )


def _check_combination(query: LogQuery) -> None:
    if query.offset is not None and (query.since is not None or query.tail_lines is not None):
        raise ApiError(
            422,
            "a read from an offset goes on from there: since and tail_lines do not apply",
            where="offset",
            hint="leave out since and tail_lines, or the offset",
        )
    if query.offset is not None and query.pod is None:
        raise ApiError(
            422, "a read from an offset is of one pod's log", where="offset", hint="give pod"
        )
    if query.forward and query.tail_bytes is not None:
        raise ApiError(
            422,
            "tail_bytes goes with a tail read; a forward read (offset, or since without "
            "tail_lines) is capped by limit_bytes",
            where="tail_bytes",
            hint="use limit_bytes",
        )
    if not query.forward and query.limit_bytes is not None:
        raise ApiError(
            422,
            "limit_bytes goes with a forward read (offset, or since without tail_lines)",
            where="limit_bytes",
            hint="use tail_bytes",
        )


def since_s(text: str, now_s: float) -> float:
    """Seconds since the epoch from a duration before ``now_s`` (``10m``) or a time (ISO, or
    seconds since the epoch: a bare number is a time, not a duration)."""
    try:
        return parse_time(text, "query.since")
    except ApiError:
        pass
    try:
        return now_s - duration_s(text, where="query.since")
    except InvalidInputError:
        raise ApiError(
            422, f"not a time or a duration: {text!r:.40}", where="query.since", hint=SINCE_HINT
        ) from None
