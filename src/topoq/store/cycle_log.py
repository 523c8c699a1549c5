"""A cycle's decisions in tables: a numbered ``cycles`` row and one ``decisions`` row per
admission, preemption, requeue and cancellation. A pending job's diagnostic is kept on its job
row (the latest, for ``explain``) and logged as a decision only when its reason changes, so a
job that waits for an hour does not write a row every cycle."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert, select, update
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


def record_cycle(connection: Connection, result: CycleResult, now: float) -> int | None:
    """Record ``result``; returns the cycle's number, or None when nothing was worth a row."""
    entries: list[tuple[DecisionKind, str, Document]] = [
        *((DecisionKind.ADMIT, a.job, encode_admission(a)) for a in result.admissions),
        *((DecisionKind.PREEMPT, p.victim, encode_preempt(p)) for p in result.preemptions),
        *((DecisionKind.REQUEUE, r.job, encode_requeue(r)) for r in result.requeues),
        *((DecisionKind.CANCEL, c.job, encode_cancel(c)) for c in result.cancellations),
        *_changed_diagnostics(connection, result.diagnostics),
    ]
    if not entries:
        return None
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
    return number


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
    connection: Connection, diagnostics: Sequence[Diagnostic]
) -> list[tuple[DecisionKind, str, Document]]:
    """Update each job's latest diagnostic; the entries for jobs whose reason changed."""
    stored = _stored_diagnostics(connection, [d.job for d in diagnostics])
    entries: list[tuple[DecisionKind, str, Document]] = []
    for diagnostic in diagnostics:
        if diagnostic.job not in stored:
            continue  # not a stored job (or gone): nothing to explain
        encoded = encode_diagnostic(diagnostic)
        previous = stored[diagnostic.job]
        if previous == encoded:
            continue
        connection.execute(
            update(JobRow).where(JobRow.id == diagnostic.job).values(diagnostic=encoded)
        )
        if previous is None or previous.get("reason") != encoded["reason"]:
            entries.append((DecisionKind.DIAGNOSTIC, diagnostic.job, encoded))
    return entries


def _stored_diagnostics(
    connection: Connection, job_ids: Sequence[str]
) -> dict[str, dict[str, Any] | None]:
    stored: dict[str, dict[str, Any] | None] = {}
    for part in chunks(job_ids):
        query = select(JobRow.id, JobRow.diagnostic).where(JobRow.id.in_(part))
        stored.update({row.id: row.diagnostic for row in connection.execute(query)})
    return stored
