"""A cycle's decisions in tables: a numbered ``cycles`` row and one ``decisions`` row per
admission, preemption, requeue and cancellation. A pending job's diagnostic is kept on its job
row (the latest, for ``explain``) and logged as a decision only when its reason changes, so a
job that waits for an hour does not write a row every cycle. A store passes the diagnostics it
knows are stored (it wrote or read them), so that only the others are read back to compare."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from sqlalchemy import Table, bindparam, insert, select, update
from sqlalchemy.engine import Connection

from topoq.domain.decisions import Admit, CycleResult, Diagnostic
from topoq.store.codec import Document, encode_resources
from topoq.store.job_rows import chunks
from topoq.store.policy_codec import (
    encode_cancel,
    encode_diagnostic,
    encode_preempt,
    encode_requeue,
)
from topoq.store.records import DecisionKind
from topoq.store.schema import CycleRow, DecisionRow, JobRow

_JOBS = cast(Table, JobRow.__table__)
_UPDATE_DIAGNOSTIC = (
    update(_JOBS).where(_JOBS.c.id == bindparam("job_id")).values(diagnostic=bindparam("encoded"))
)


@dataclass
class RecordedCycle:
    number: int | None = None
    """None when nothing was worth a row."""
    diagnostics: dict[str, Diagnostic] = field(default_factory=dict)
    """The diagnostic each pending job now has stored (of those compared)."""


def record_cycle(
    connection: Connection,
    result: CycleResult,
    now: float,
    known: Mapping[str, Diagnostic] | None = None,
) -> RecordedCycle:
    """Record ``result``. ``known``: diagnostics the caller knows are stored (not read back)."""
    recorded = RecordedCycle()
    entries: list[tuple[DecisionKind, str, Document]] = [
        *((DecisionKind.ADMIT, a.job, encode_admission(a)) for a in result.admissions),
        *((DecisionKind.PREEMPT, p.victim, encode_preempt(p)) for p in result.preemptions),
        *((DecisionKind.REQUEUE, r.job, encode_requeue(r)) for r in result.requeues),
        *((DecisionKind.CANCEL, c.job, encode_cancel(c)) for c in result.cancellations),
        *_changed_diagnostics(connection, result.diagnostics, known or {}, recorded.diagnostics),
    ]
    if not entries:
        return recorded
    number: int = connection.execute(
        insert(CycleRow)
        .values(
            at=now,
            admissions=len(result.admissions),
            preemptions=len(result.preemptions),
            requeues=len(result.requeues),
            cancellations=len(result.cancellations),
            diagnostics=len(result.diagnostics),
        )
        .returning(CycleRow.number)
    ).scalar_one()
    rows = [
        {"cycle": number, "at": now, "kind": kind.value, "job_id": job, "detail": detail}
        for kind, job, detail in entries
    ]
    connection.execute(insert(DecisionRow), rows)
    recorded.number = number
    return recorded


def encode_admission(admit: Admit) -> Document:
    """An admission's summary for the log (the full allocation is on the job and its event)."""
    allocation = admit.allocation
    return {
        "job": admit.job,
        "nodes": sorted(allocation.nodes),
        "usage": {flavor: encode_resources(r) for flavor, r in allocation.usage.items()},
        "borrowed": {flavor: encode_resources(r) for flavor, r in allocation.borrowed.items()},
    }


def _changed_diagnostics(
    connection: Connection,
    diagnostics: Sequence[Diagnostic],
    known: Mapping[str, Diagnostic],
    now_stored: dict[str, Diagnostic],
) -> list[tuple[DecisionKind, str, Document]]:
    """Update each job's latest diagnostic; the entries for jobs whose reason changed. Fills
    ``now_stored`` with what the jobs compared have stored after this. A job waiting for the
    same reason with the same numbers is recognised by comparing diagnostics, without encoding
    them; the rows that changed are written in one statement."""
    candidates = [
        diagnostic for diagnostic in diagnostics if known.get(diagnostic.job) != diagnostic
    ]
    stored = _stored_diagnostics(connection, [diagnostic.job for diagnostic in candidates])
    entries: list[tuple[DecisionKind, str, Document]] = []
    updates: list[dict[str, Any]] = []
    for diagnostic in candidates:
        job = diagnostic.job
        if job not in stored:
            continue  # not a stored job (or gone): nothing to explain
        now_stored[job] = diagnostic
        encoded, previous = encode_diagnostic(diagnostic), stored[job]
        if previous == encoded:
            continue
        updates.append({"job_id": job, "encoded": encoded})
        if previous is None or previous.get("reason") != encoded["reason"]:
            entries.append((DecisionKind.DIAGNOSTIC, job, encoded))
    if updates:
        connection.execute(_UPDATE_DIAGNOSTIC, updates)
    return entries


def _stored_diagnostics(
    connection: Connection, job_ids: Sequence[str]
) -> dict[str, dict[str, Any] | None]:
    stored: dict[str, dict[str, Any] | None] = {}
    for part in chunks(job_ids):
        query = select(JobRow.id, JobRow.diagnostic).where(JobRow.id.in_(part))
        stored.update({row.id: row.diagnostic for row in connection.execute(query)})
    return stored
