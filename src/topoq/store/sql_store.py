"""``SqlStore``: the engine's ``Store`` port on SQLite or PostgreSQL, plus the queries the API
and the reports need. Every write is one transaction; a read is one transaction, one
statement, or statements that cannot disagree (``store/transactions.py``, docs/store.md).

Optimistic concurrency: each job row has a ``version``. The store remembers, per thread, the
version of every job it handed out (``jobs``, ``job``, ``job_record``, ``add_job``) and
``save_jobs`` writes a job only if its row still has that version; otherwise it raises
``ConcurrentUpdate`` and writes nothing. ``save_jobs(expected_versions=...)`` states the
versions explicitly (from ``job_record``) for writers that read elsewhere.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from sqlalchemy import asc, desc, func, select
from sqlalchemy.engine import Connection

from topoq.core.fair_share import TeamUsage
from topoq.domain.decisions import CycleResult, Diagnostic
from topoq.domain.governance import ClusterPolicy, TeamName
from topoq.domain.job import JobId, JobPhase, JobSpec, JobView
from topoq.domain.node import NodeSpec
from topoq.engine.ports import AuditEntry, UnknownJob
from topoq.store import audit_log, inventory, job_events, job_rows, team_usage, tokens
from topoq.store.active_jobs import ActiveJobs
from topoq.store.cycle_log import RecordedCycle, StoredDiagnostic, record_cycle
from topoq.store.database import Database, connect, migrate, resolve_url
from topoq.store.group_commit import GroupCommit
from topoq.store.job_cache import JobCache
from topoq.store.job_counts import TeamPhaseCounts
from topoq.store.policy_codec import decode_diagnostic
from topoq.store.records import (
    DecisionKind,
    DecisionRecord,
    JobEvent,
    JobRecord,
    PolicyVersion,
    TokenRecord,
)
from topoq.store.schema import (
    ApiTokenRow,
    CycleRow,
    DecisionRow,
    JobEventRow,
    JobRow,
    NodeRow,
    PolicyVersionRow,
)
from topoq.store.submissions import Submission, SubmissionWriter
from topoq.store.transactions import T, Transactions, Work

CHANGE_MARKS = select(
    select(func.max(JobRow.write_seq)).scalar_subquery(),
    select(func.count()).select_from(NodeRow).scalar_subquery(),
    select(func.max(NodeRow.write_seq)).scalar_subquery(),
    select(func.max(PolicyVersionRow.version)).scalar_subquery(),
    select(func.max(CycleRow.number)).scalar_subquery(),
)
"""``SqlStore.change_marks``' one statement."""

MAX_REMEMBERED_VERSIONS = 100_000
"""Per thread; past it the memory starts afresh (writes then fall back to the history check)."""
TOKEN_CACHE_S = 5.0
"""How long a verified token is trusted without asking the database again. A revocation
through this store takes effect at once; one made by another process within this time."""
POLICY_RECHECK_S = 1.0
"""How long the latest policy is answered from memory before the database is asked whether
there is a newer version. A version saved through this store is seen at once; one saved by
another process within this time."""
MAX_KNOWN_DIAGNOSTICS = 20_000
"""Pending jobs' diagnostics remembered as stored; past it the memory starts afresh."""


@dataclass(frozen=True)
class InventoryWrite:
    """What ``SqlStore.change_inventory`` writes in one transaction: the new inventory, the
    jobs it sends back to the queue, and the audit entry of the change."""

    nodes: Sequence[NodeSpec]
    requeued: Sequence[JobView]
    audit: AuditEntry


class _ReadVersions(threading.local):
    def __init__(self) -> None:
        self.of_job: dict[JobId, int] = {}


def open_store(url: str | None, data_dir: Path) -> SqlStore:
    """The store at ``url`` with its schema brought up to date. ``None`` is the embedded SQLite
    file ``data_dir/topoq.db``; ``postgresql://…`` is PostgreSQL (via psycopg)."""
    database = connect(resolve_url(url, data_dir))
    migrate(database)
    return SqlStore(database)


class SqlStore:
    def __init__(self, database: Database) -> None:
        self.database = database
        self._read_versions = _ReadVersions()
        self._known_jobs = JobCache()
        self._active_jobs = ActiveJobs()
        self._known_nodes = inventory.KnownNodes()
        self._transactions = Transactions(database)
        self._submissions = GroupCommit(SubmissionWriter(self._transactions).commit)
        self._verified_tokens: dict[str, tuple[TokenRecord, float]] = {}
        self._revocations = 0
        """Counts revocations, so that a lookup that raced one does not keep its answer."""
        self._policy: tuple[int, ClusterPolicy, float] | None = None
        """The latest policy read: its version, itself, and when the version was checked."""
        self._policy_saves = 0
        self._team_counts = TeamPhaseCounts()
        self._known_diagnostics: dict[str, StoredDiagnostic] = {}
        """What each pending job's stored diagnostic is, as this store last wrote or read it,
        with the row's document (another process's controller writing the same jobs'
        diagnostics is not seen)."""

    def close(self) -> None:
        self.database.dispose()

    def __enter__(self) -> SqlStore:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # --- transactions -------------------------------------------------------------------
    def _read(self, work: Work[T]) -> T:
        return self._transactions.read(work)

    def _query(self, work: Work[T]) -> T:
        return self._transactions.query(work)

    def _write(self, work: Work[T]) -> T:
        return self._transactions.write(work)

    def _remember(self, records: Mapping[JobId, JobRecord]) -> None:
        seen = self._read_versions.of_job
        if len(seen) + len(records) > MAX_REMEMBERED_VERSIONS:
            seen.clear()
        seen.update((job_id, record.version) for job_id, record in records.items())

    # --- jobs (the Store port) ----------------------------------------------------------
    def add_job(
        self, spec: JobSpec, *, actor: str, now: float, audit: AuditEntry | None = None
    ) -> JobView:
        """Store a new pending job (history: submitted) and, in the same transaction,
        ``audit`` when given. Raises DuplicateJob (nothing written).

        Concurrent calls share transactions (group commit, ``GroupCommit``): each returns once
        the transaction that carried its job has committed."""
        with self._team_counts.writing():
            view = self._submissions.run(Submission(spec, now, audit))
        self._read_versions.of_job[spec.id] = 1
        return view

    def jobs(self, *, include_finished: bool = False) -> dict[JobId, JobView]:
        """The unfinished jobs (every job with ``include_finished``), oldest submission
        first. The unfinished ones are brought up to date from the last read by the rows
        written since (``store/active_jobs.py``): a read costs what changed."""
        records: Mapping[JobId, JobRecord]
        if include_finished:
            records = self._read(lambda c: job_rows.read_records(c, [], self._known_jobs))
        else:
            records = self._read(lambda c: self._active_jobs.read(c, self._known_jobs))
        self._remember(records)
        return {job_id: record.view for job_id, record in records.items()}

    def holding_jobs(self) -> dict[JobId, JobView]:
        """Every job that holds capacity (admitted or running): one query on the ``phase``
        index, so its cost follows the jobs that run, not the length of the queue."""
        where = [JobRow.phase.in_(job_rows.HOLDING_PHASES)]
        records = self._read(lambda c: job_rows.read_records(c, where, self._known_jobs))
        self._remember(records)
        return {job_id: record.view for job_id, record in records.items()}

    def count_jobs_submitted_between(self, start_s: float, end_s: float) -> int:
        """How many jobs ``jobs_submitted_between`` would read (one count on the index)."""
        query = (
            select(func.count())
            .select_from(JobRow)
            .where(JobRow.submitted_at >= start_s, JobRow.submitted_at < end_s)
        )
        return int(self._query(lambda c: c.execute(query).scalar_one()))

    def submission_span(self) -> tuple[float, float] | None:
        """When the oldest and the newest job held were submitted (None: none is held)."""
        oldest = self.list_jobs(limit=1, newest_first=False)
        newest = self.list_jobs(limit=1)
        if not oldest or not newest:
            return None
        return oldest[0].spec.submitted_at, newest[0].spec.submitted_at

    def jobs_submitted_between(self, start_s: float, end_s: float) -> dict[JobId, JobView]:
        """Every job submitted with ``start_s <= submitted_at < end_s``, finished or not, with
        its whole history, oldest submission first: what ``topoq whatif`` replays. One query
        on the ``submitted_at`` index, so its cost follows the window, not the database."""
        where = [JobRow.submitted_at >= start_s, JobRow.submitted_at < end_s]
        records = self._read(lambda c: job_rows.read_records(c, where, self._known_jobs))
        return {job_id: record.view for job_id, record in records.items()}

    def job(self, job_id: JobId) -> JobView:
        return self.job_record(job_id).view

    def job_record(self, job_id: JobId) -> JobRecord:
        """The job with its row version; raises UnknownJob. One statement when this store
        read the job at its current version before (``job_rows.read_one``)."""
        record = self._query(lambda c: job_rows.read_one(c, job_id, self._known_jobs))
        self._remember({job_id: record})
        return record

    def phases_of(self, ids: Collection[JobId]) -> dict[JobId, JobPhase]:
        """The phase of each stored job among ``ids``: one statement per ``IN_LIST_CHUNK``
        ids on the primary key, in one transaction; no statement for no ids."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        return self._read(lambda c: job_rows.phases_of(c, wanted))

    def save_jobs(
        self,
        changed: Sequence[JobView],
        *,
        now: float,
        decisions: CycleResult | None = None,
        expected_versions: Mapping[JobId, int] | None = None,
    ) -> None:
        """Atomically update the changed jobs, append their new history entries and record the
        cycle's decisions. Raises ConcurrentUpdate (nothing written) when a job changed since
        this thread read it (or since ``expected_versions``), UnknownJob for unknown ids."""
        seen, given = self._read_versions.of_job, expected_versions or {}
        expected = {
            view.id: version
            for view in changed
            if (version := given.get(view.id, seen.get(view.id))) is not None
        }
        known = self._known_diagnostics

        def save(connection: Connection) -> tuple[dict[JobId, int], RecordedCycle | None]:
            versions = job_rows.update_jobs(connection, changed, expected, now)
            recorded = record_cycle(connection, decisions, now, known) if decisions else None
            return versions, recorded

        with self._team_counts.writing():
            versions, recorded = self._write(save)
        self._read_versions.of_job.update(versions)
        if recorded is not None:
            if len(known) + len(recorded.diagnostics) > MAX_KNOWN_DIAGNOSTICS:
                known.clear()
            known.update(recorded.diagnostics)
        for view in changed:
            if view.phase is not JobPhase.PENDING:
                known.pop(view.id, None)  # the row's diagnostic was cleared

    # --- jobs (queries for the API and reports) -----------------------------------------
    def list_jobs(
        self,
        *,
        team: str | Collection[str] | None = None,
        phase: JobPhase | Collection[JobPhase] | None = None,
        user: str | None = None,
        limit: int = 100,
        offset: int = 0,
        newest_first: bool = True,
    ) -> list[JobView]:
        """Jobs matching every filter given (a collection matches any of its members)."""
        direction = desc if newest_first else asc
        query = (
            select(*job_rows.VIEW_COLUMNS)
            .where(*job_rows.job_filters(team, phase, user))
            .order_by(direction(JobRow.submitted_at), direction(JobRow.id))
            .limit(max(limit, 0))
            .offset(max(offset, 0))
        )
        records = self._read(lambda c: job_rows.records_of(c, query, self._known_jobs))
        return [record.view for record in records]

    def count_jobs(
        self,
        *,
        team: str | Collection[str] | None = None,
        phase: JobPhase | Collection[JobPhase] | None = None,
        user: str | None = None,
    ) -> int:
        query = (
            select(func.count()).select_from(JobRow).where(*job_rows.job_filters(team, phase, user))
        )
        return int(self._query(lambda c: c.execute(query).scalar_one()))

    def count_jobs_by_team_and_phase(
        self, teams: Collection[str]
    ) -> dict[tuple[str, JobPhase], int]:
        """How many unfinished jobs each of ``teams`` has in each phase (``job_counts``)."""
        return self._team_counts.read(teams, self._query)

    def job_history(self, job_id: JobId) -> list[JobEvent]:
        """Every phase change of the job, oldest first; raises UnknownJob."""
        query = select(JobEventRow).where(JobEventRow.job_id == job_id).order_by(JobEventRow.seq)

        def history(connection: Connection) -> list[JobEvent]:
            events = [job_rows.event_from_row(row) for row in connection.execute(query)]
            if not events:
                job_rows.read_one(connection, job_id)  # raises UnknownJob
            return events

        return self._query(history)  # entries never change once written

    def job_events_between(
        self,
        start_s: float,
        end_s: float,
        *,
        team: str | None = None,
        holding_at_start: bool = False,
    ) -> list[JobEvent]:
        """Phase changes with ``start_s <= at < end_s`` (of one team), in time order. For usage
        reports (a job holds its ``admitted`` event's allocation until its next event that
        does not hold capacity), ``holding_at_start`` adds first, for every job that held
        capacity at ``start_s``, the admission that booked it (from before the window), so
        that a holding that began before the window counts in it even without an event in
        it; ``topoq.core.usage.usage_report`` takes the answer as it is."""

        def events(connection: Connection) -> list[JobEvent]:
            held = (
                job_events.admissions_holding_at(connection, start_s, team)
                if holding_at_start
                else []
            )
            return held + job_events.events_between(connection, start_s, end_s, team)

        return self._read(events)

    def diagnostic(self, job_id: JobId) -> Diagnostic | None:
        """Why the job last waited (the latest cycle's diagnostic); raises UnknownJob."""
        query = select(JobRow.diagnostic).where(JobRow.id == job_id)
        row = self._query(lambda c: c.execute(query).one_or_none())
        if row is None:
            raise UnknownJob(f"no job has the id {job_id!r}")
        return None if row.diagnostic is None else decode_diagnostic(row.diagnostic)

    def diagnostics(self, job_ids: Collection[JobId]) -> dict[JobId, Diagnostic]:
        """Why each of ``job_ids`` last waited (ids without a diagnostic, or of no job, are left
        out), read as ``phases_of`` reads: what a page of the job list shows beside its
        pending jobs."""
        wanted = sorted(set(job_ids))
        if not wanted:
            return {}
        stored = self._read(lambda c: job_rows.diagnostics_of(c, wanted))
        return {job: decode_diagnostic(data) for job, data in stored.items()}

    def decisions(self, *, limit: int = 100, job: JobId | None = None) -> list[DecisionRecord]:
        """The newest decisions first (of one job, if given)."""
        query = select(DecisionRow).order_by(DecisionRow.id.desc()).limit(max(limit, 0))
        if job is not None:
            query = query.where(DecisionRow.job_id == job)
        rows = self._query(lambda c: c.execute(query).all())
        return [
            DecisionRecord(row.cycle, row.at, DecisionKind(row.kind), JobId(row.job_id), row.detail)
            for row in rows
        ]

    # --- policy -------------------------------------------------------------------------
    def policy(self) -> ClusterPolicy | None:
        """The latest version. Answered from memory for ``POLICY_RECHECK_S``, then the latest
        version number is read, and the policy itself only when it is a new version."""
        cached, clock, saves = self._policy, time.monotonic(), self._policy_saves
        if cached is not None and clock - cached[2] < POLICY_RECHECK_S:
            return cached[1]

        def latest(connection: Connection) -> tuple[int | None, ClusterPolicy | None]:
            version = inventory.latest_policy_version(connection)
            if version is None or (cached is not None and cached[0] == version):
                return version, None if cached is None or version is None else cached[1]
            return version, inventory.read_policy(connection, version)

        version, policy = self._query(latest)  # a version, once saved, never changes
        if version is not None and policy is not None and saves == self._policy_saves:
            self._policy = (version, policy, clock)
        return policy

    def policy_at(self, version: int) -> ClusterPolicy | None:
        """An earlier (or the current) policy version, or None when there is no such version."""
        return self._query(lambda c: inventory.read_policy(c, version))

    def save_policy(self, policy: ClusterPolicy, *, actor: str, now: float) -> int:
        self._policy_saves += 1
        try:
            return self._write(lambda c: inventory.insert_policy(c, policy, actor, now))
        finally:
            self._policy_saves += 1
            self._policy = None

    def policy_versions(self) -> list[PolicyVersion]:
        """Every version kept, oldest first."""
        query = select(PolicyVersionRow.version, PolicyVersionRow.actor, PolicyVersionRow.at)
        rows = self._query(lambda c: c.execute(query.order_by(PolicyVersionRow.version)).all())
        return [PolicyVersion(row.version, row.actor, row.at) for row in rows]

    # --- nodes --------------------------------------------------------------------------
    def nodes(self) -> list[NodeSpec]:
        return self._query(self._known_nodes.read)

    def save_nodes(self, nodes: Sequence[NodeSpec], *, actor: str, now: float) -> None:
        """Replace the inventory (nodes not listed are removed). The caller audits the change."""
        self._write(lambda c: inventory.replace_nodes(c, nodes, now))

    def change_inventory(
        self,
        decide: Callable[[list[NodeSpec], dict[JobId, JobView]], tuple[InventoryWrite, T]],
        *,
        now: float,
    ) -> T:
        """All or nothing, in one write transaction: ``decide`` gets the stored nodes and the
        jobs holding capacity — read once job writes wait for this transaction (a controller
        commit lands before the read or after the write, never between) — and says what to
        write; the inventory is replaced, the requeued jobs saved and the change audited.
        Returns what ``decide`` returned beside the write; when ``decide`` raises, nothing
        is written."""
        holding_now = [JobRow.phase.in_(job_rows.HOLDING_PHASES)]

        def change(connection: Connection) -> tuple[dict[JobId, int], T]:
            job_rows.next_write_seq(connection)  # job writes take turns behind this one
            nodes = self._known_nodes.read(connection)
            holding = job_rows.read_records(connection, holding_now, self._known_jobs)
            write, answer = decide(nodes, {job_id: r.view for job_id, r in holding.items()})
            inventory.replace_nodes(connection, write.nodes, now)
            expected = {job.id: holding[job.id].version for job in write.requeued}
            versions = job_rows.update_jobs(connection, write.requeued, expected, now)
            audit_log.insert_entries(connection, [write.audit])
            return versions, answer

        with self._team_counts.writing():
            versions, answer = self._write(change)
        self._read_versions.of_job.update(versions)
        return answer

    def update_node(
        self,
        name: str,
        *,
        ready: bool | None = None,
        unschedulable: bool | None = None,
        now: float,
    ) -> NodeSpec | None:
        """Set one node's health and/or cordon state, and nothing else (one row); the node as
        it is now, or None when there is no such node. The caller audits the change."""
        return self._write(
            lambda c: inventory.update_node_state(
                c, name, ready=ready, unschedulable=unschedulable, now=now
            )
        )

    # --- what changed -------------------------------------------------------------------
    def change_marks(self) -> tuple[int, ...]:
        """Marks that move with every write a view of the cluster shows (one statement): the
        latest job write, the count and latest write of nodes, the latest policy version, the
        latest recorded cycle (a cycle with a decision, or a pending job's reason changed).
        Equal marks: none of those changed."""
        return self._query(lambda c: tuple(int(v or 0) for v in c.execute(CHANGE_MARKS).one()))

    # --- fair-share usage ---------------------------------------------------------------
    def fair_share_usage(self) -> dict[TeamName, TeamUsage]:
        """Each team's decayed fair-share usage as last saved (one statement)."""
        return self._query(team_usage.read_usage)

    def save_fair_share_usage(self, usage: Mapping[TeamName, TeamUsage]) -> None:
        """Replace every team's usage in one transaction (teams not given are removed)."""
        self._write(lambda c: team_usage.replace_usage(c, usage))

    # --- audit --------------------------------------------------------------------------
    def audit(self, entry: AuditEntry) -> None:
        self._write(lambda c: audit_log.insert_entries(c, [entry]))

    def audit_log(
        self, *, limit: int = 100, since_s: float | None = None, actor: str | None = None
    ) -> list[AuditEntry]:
        return self._query(
            lambda c: audit_log.newest_entries(c, limit, since_s=since_s, actor=actor)
        )

    # --- API tokens ---------------------------------------------------------------------
    def create_token(
        self, name: str, role: str, teams: Collection[str] = (), *, now: float | None = None
    ) -> tuple[str, TokenRecord]:
        """A new token: its secret (shown once, never stored) and its record."""
        return self._write(lambda c: tokens.insert_token(c, name, role, teams, _now(now)))

    def token_for(self, plaintext: str) -> TokenRecord | None:
        """The active token with this secret; None for an unknown or revoked one. A token
        found is trusted for ``TOKEN_CACHE_S`` without asking the database again."""
        cached = self.cached_token(plaintext)
        if cached is not None:
            return cached
        digest, clock = tokens.hash_token(plaintext), time.monotonic()
        revocations = self._revocations
        record = self._query(lambda c: tokens.find_token(c, plaintext))
        if record is None:
            self._verified_tokens.pop(digest, None)
        elif revocations == self._revocations:
            self._verified_tokens[digest] = (record, clock + TOKEN_CACHE_S)
        return record

    def cached_token(self, plaintext: str) -> TokenRecord | None:
        """The token if ``token_for`` found it less than ``TOKEN_CACHE_S`` ago (no I/O)."""
        cached = self._verified_tokens.get(tokens.hash_token(plaintext))
        if cached is not None and cached[1] > time.monotonic():
            return cached[0]
        return None

    def revoke_token(self, token_id: str, *, now: float | None = None) -> TokenRecord:
        """Revoke a token at once; raises UnknownToken."""
        self._revocations += 1
        record = self._write(lambda c: tokens.mark_revoked(c, token_id, _now(now)))
        self._revocations += 1
        for digest, (cached, _) in list(self._verified_tokens.items()):
            if cached.id == token_id:
                self._verified_tokens.pop(digest, None)
        return record

    def tokens(self, *, include_revoked: bool = False) -> list[TokenRecord]:
        query = select(*tokens.TOKEN_COLUMNS).order_by(ApiTokenRow.created_at, ApiTokenRow.id)
        if not include_revoked:
            query = query.where(ApiTokenRow.revoked_at.is_(None))
        return self._query(lambda c: [tokens.token_from_row(row) for row in c.execute(query)])


def _now(now: float | None) -> float:
    return time.time() if now is None else now
