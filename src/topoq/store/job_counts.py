"""The teams' job counts by phase (``GET /teams``): one grouped count that seeks the covering
``(team, phase)`` index for the teams asked, remembered for ``TEAM_COUNTS_S``.

Naming the teams matters on SQLite, which would otherwise walk the ``phase`` index and read
every row. The memory matters on PostgreSQL, where the count costs 5–25 ms at 20,000 pending
jobs (an index-only scan only once vacuum has marked the pages): a request rate does not
multiply it. A job written through the store forgets the counts when the write ends; counts
read while a write ran are not kept; a job written by another process (the controller) is
counted within ``TEAM_COUNTS_S``."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Collection, Iterator
from typing import Final

from sqlalchemy import bindparam, func, select

from topoq.domain.job import JobPhase
from topoq.store.job_rows import ACTIVE_PHASES
from topoq.store.schema import JobRow
from topoq.store.transactions import Work

TEAM_COUNTS_S = 1.0
"""How long counts are answered from memory when no job was written through this store."""
COUNTS_BY_TEAM_AND_PHASE: Final = (
    select(JobRow.team, JobRow.phase, func.count().label("jobs"))
    .where(
        JobRow.team.in_(bindparam("teams", expanding=True)),
        JobRow.phase.in_(bindparam("phases", expanding=True)),
    )
    .group_by(JobRow.team, JobRow.phase)
)
"""Built once."""

Counts = dict[tuple[str, JobPhase], int]
Query = Callable[[Work[list[tuple[str, str, int]]]], list[tuple[str, str, int]]]
"""Runs work on the store's database (``SqlStore._query``)."""


class TeamPhaseCounts:
    """Thread-safe; one per store."""

    def __init__(self, keep_s: float = TEAM_COUNTS_S) -> None:
        self.keep_s = keep_s
        self._lock = threading.Lock()
        self._writes = 0
        """Counts the starts and ends of job writes, so that counts read meanwhile are not
        kept."""
        self._kept: tuple[frozenset[str], Counts, float] | None = None
        """For which teams, the counts, and when they were read."""

    @contextlib.contextmanager
    def writing(self) -> Iterator[None]:
        """Around every job write of the store."""
        with self._lock:
            self._writes += 1
        try:
            yield
        finally:
            with self._lock:
                self._writes += 1
                self._kept = None

    def read(self, teams: Collection[str], query: Query) -> Counts:
        """The counts of ``teams``: remembered ones, or read with ``query`` (the store's
        statement runner) and remembered."""
        asked, clock = frozenset(teams), time.monotonic()
        with self._lock:
            kept, writes = self._kept, self._writes
        if kept is not None and kept[0] == asked and clock - kept[2] < self.keep_s:
            return dict(kept[1])
        parameters = {"teams": sorted(asked), "phases": list(ACTIVE_PHASES)}
        rows = query(
            lambda c: [
                (str(row.team), str(row.phase), int(row.jobs))
                for row in c.execute(COUNTS_BY_TEAM_AND_PHASE, parameters)
            ]
        )
        counts = {(team, JobPhase(phase)): jobs for team, phase, jobs in rows}
        with self._lock:
            if writes == self._writes:  # no job write began or ended meanwhile
                self._kept = (asked, counts, clock)
        return dict(counts)
