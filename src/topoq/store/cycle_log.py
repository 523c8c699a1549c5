"""A cycle's decisions in tables: a numbered ``cycles`` row and one ``decisions`` row per
admission, preemption, requeue and cancellation. A pending job's diagnostic is kept on its job
row (the latest, for ``explain``) and logged as a decision only when its reason changes, so a
job that waits for an hour does not write a row every cycle. A store passes the diagnostics it
knows are stored (it wrote them), with their encoding, so that only the others are read back
to compare: a cycle's cost follows the diagnostics that changed, not the length of the queue."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import insert, select
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
from topoq.store.schema import CycleRow, JobRow

UPDATE_DIAGNOSTIC = {
    "sqlite": "UPDATE jobs SET diagnostic = ? WHERE id = ?",
    "postgresql": "UPDATE jobs SET diagnostic = CAST(%s AS JSON) WHERE id = %s",
}
"""Each job's new diagnostic as JSON text, given to the driver as it is: through SQLAlchemy's
statement, processing each row's parameters cost as much as running the update (~5 µs of
~15 per row, and a cycle rewrites thousands). The text is what the ``JSON`` column writes
(``json.dumps``), so the row reads back the same."""
INSERT_DECISION = {
    "sqlite": "INSERT INTO decisions (cycle, at, kind, job_id, detail) VALUES (?, ?, ?, ?, ?)",
    "postgresql": "INSERT INTO decisions (cycle, at, kind, job_id, detail) "
    "VALUES (%s, %s, %s, %s, CAST(%s AS JSON))",
}
"""A cycle's decisions, their details as JSON text, given to the driver as they are (as
``UPDATE_DIAGNOSTIC``: a change of reason for thousands of waiting jobs is thousands of rows);
a diagnostic's text is the one its job's row was just given."""


@dataclass(frozen=True)
class StoredDiagnostic:
    """A pending job's diagnostic as its row holds it, and that row's document."""

    diagnostic: Diagnostic
    encoded: Document


@dataclass
class RecordedCycle:
    number: int | None = None
    """None when nothing was worth a row."""
    diagnostics: dict[str, StoredDiagnostic] = field(default_factory=dict)
    """What each pending job now has stored (of those that were not known as they are)."""


def record_cycle(
    connection: Connection,
    result: CycleResult,
    now: float,
    known: Mapping[str, StoredDiagnostic] | None = None,
) -> RecordedCycle:
    """Record ``result``. ``known``: diagnostics the caller knows are stored (not read back)."""
    recorded = RecordedCycle()
    documents: list[tuple[DecisionKind, str, Document]] = [
        *((DecisionKind.ADMIT, a.job, encode_admission(a)) for a in result.admissions),
        *((DecisionKind.PREEMPT, p.victim, encode_preempt(p)) for p in result.preemptions),
        *((DecisionKind.REQUEUE, r.job, encode_requeue(r)) for r in result.requeues),
        *((DecisionKind.CANCEL, c.job, encode_cancel(c)) for c in result.cancellations),
    ]
    entries = [(kind, job, json.dumps(detail)) for kind, job, detail in documents]
    entries += _changed_diagnostics(
        connection, result.diagnostics, known or {}, recorded.diagnostics
    )
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
    rows = [(number, now, kind.value, job, detail) for kind, job, detail in entries]
    connection.exec_driver_sql(INSERT_DECISION[connection.dialect.name], rows)
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
    known: Mapping[str, StoredDiagnostic],
    now_stored: dict[str, StoredDiagnostic],
) -> list[tuple[DecisionKind, str, str]]:
    """Update each job's latest diagnostic; the entries for jobs whose reason changed. Fills
    ``now_stored`` with what the jobs not known as they are have stored after this. A job
    waiting for the same reason with the same numbers is recognised without encoding its
    diagnostic (a cycle that parks it hands out the very object it stored: identity first);
    a known one is compared with its remembered document, and only the others are read back.
    The rows that changed are written in one statement."""
    changed: list[tuple[Diagnostic, StoredDiagnostic | None]] = []
    for diagnostic in diagnostics:
        stored = known.get(diagnostic.job)
        if stored is None or stored.diagnostic is not diagnostic:
            if stored is not None and stored.diagnostic == diagnostic:
                now_stored[diagnostic.job] = StoredDiagnostic(diagnostic, stored.encoded)
            else:
                changed.append((diagnostic, stored))
    unknown = [diagnostic.job for diagnostic, stored in changed if stored is None]
    read = _stored_diagnostics(connection, unknown)
    entries: list[tuple[DecisionKind, str, str]] = []
    updates: list[tuple[str, str]] = []
    text = _DiagnosticText()
    for diagnostic, stored in changed:
        job = diagnostic.job
        if stored is None and job not in read:
            continue  # not a stored job (or gone): nothing to explain
        previous = read[job] if stored is None else stored.encoded
        encoded = encode_diagnostic(diagnostic)
        now_stored[job] = StoredDiagnostic(diagnostic, encoded)
        if previous == encoded:
            continue
        written = text.of(diagnostic)
        updates.append((written, job))
        if previous is None or previous.get("reason") != encoded["reason"]:
            entries.append((DecisionKind.DIAGNOSTIC, job, written))
    if updates:
        connection.exec_driver_sql(UPDATE_DIAGNOSTIC[connection.dialect.name], updates)
    return entries


class _DiagnosticText:
    """``json.dumps(encode_diagnostic(d))``, the part after the job's id written once for the
    jobs that wait alike: they share the diagnostic's message, numbers and remedies (the
    cycle names one job's diagnostic for the others of its class), and a cycle after a
    change may rewrite thousands of them."""

    def __init__(self) -> None:
        self._rest: dict[tuple[object, ...], tuple[object, str]] = {}
        """By the diagnostic's parts (its numbers by ``id``: kept with the text, so that the
        id stays their own), the text after the job's id."""

    def of(self, diagnostic: Diagnostic) -> str:
        numbers = diagnostic.numbers
        key = (diagnostic.reason, diagnostic.message, id(numbers), diagnostic.remedies)
        known = self._rest.get(key)
        if known is None or known[0] is not numbers:
            document = encode_diagnostic(diagnostic)
            del document["job"]
            known = self._rest[key] = (numbers, json.dumps(document)[1:])
        return '{"job": ' + json.dumps(diagnostic.job) + ", " + known[1]


def _stored_diagnostics(
    connection: Connection, job_ids: Sequence[str]
) -> dict[str, dict[str, Any] | None]:
    stored: dict[str, dict[str, Any] | None] = {}
    for part in chunks(job_ids):
        query = select(JobRow.id, JobRow.diagnostic).where(JobRow.id.in_(part))
        stored.update({row.id: row.diagnostic for row in connection.execute(query)})
    return stored
