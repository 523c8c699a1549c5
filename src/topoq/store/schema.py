"""The tables, as SQLAlchemy 2 typed declarative classes. One schema for SQLite and PostgreSQL:
portable column types only, JSON for specs, times as epoch seconds (``Double``).

Alembic migrations (``migrations/versions``) create exactly this; a test compares the two.
Change a table here and add a migration in the same commit.
"""

from __future__ import annotations

from typing import Any, ClassVar

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Double,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAME_LENGTH = 253
"""Kubernetes' longest object name; ids, teams, users and node names fit."""
SHORT_LENGTH = 32

NAMING_CONVENTION = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}
"""Deterministic constraint names, so that migrations name the same thing on both backends."""

Json = JSON(none_as_null=True)
SerialId = BigInteger().with_variant(Integer, "sqlite")
"""An autoincrementing key: SQLite only autoincrements ``INTEGER PRIMARY KEY``."""


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map: ClassVar[dict[Any, Any]] = {dict[str, Any]: Json, list[Any]: Json}


class JobRow(Base):
    """One submitted job and where it stands; ``version`` grows by one with every update.

    The indexes cover every combination of the list filters (team, phase, user), so that
    counting a filtered list reads index entries only, never the rows with their specs."""

    __tablename__ = "jobs"
    __table_args__ = (
        Index("ix_jobs_team_phase", "team", "phase"),
        Index("ix_jobs_user_name_team_phase", "user_name", "team", "phase"),
    )

    id: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    team: Mapped[str] = mapped_column(String(NAME_LENGTH))
    user_name: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    phase: Mapped[str] = mapped_column(String(SHORT_LENGTH), index=True)
    priority_class: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    submitted_at: Mapped[float] = mapped_column(Double, index=True)
    held: Mapped[bool] = mapped_column(Boolean)
    failures: Mapped[int] = mapped_column(Integer)
    preemptions: Mapped[int] = mapped_column(Integer)
    preempted_for: Mapped[str | None] = mapped_column(String(NAME_LENGTH))
    """While the job is being preempted: the job it is evicted for."""
    attempt: Mapped[int] = mapped_column(Integer)
    """How many times the job was admitted (the executor's attempt number)."""
    history_length: Mapped[int] = mapped_column(Integer)
    """How many ``job_events`` rows the job has: the next event's ``seq``."""
    spec: Mapped[dict[str, Any]] = mapped_column(Json)
    allocation: Mapped[dict[str, Any] | None] = mapped_column(Json)
    diagnostic: Mapped[dict[str, Any] | None] = mapped_column(Json)
    """Why the job last waited (the latest cycle's diagnostic), for ``explain``."""
    previous_nodes: Mapped[list[str] | None] = mapped_column(Json)
    """The nodes it held when a node failure last requeued it (sorted), else null."""
    admitted_at: Mapped[float | None] = mapped_column(Double)
    started_at: Mapped[float | None] = mapped_column(Double)
    updated_at: Mapped[float] = mapped_column(Double)
    version: Mapped[int] = mapped_column(Integer)
    write_seq: Mapped[int] = mapped_column(BigInteger, index=True, server_default="0")
    """Where the row's last write falls among all writes of job rows, which take turns
    (``job_rows.next_write_seq``): a reader that saw every write up to N finds what changed
    since in the rows whose ``write_seq`` is greater (``store/active_jobs.py``)."""


class JobEventRow(Base):
    """Append-only phase history: row ``seq`` is ``JobView.history[seq]``."""

    __tablename__ = "job_events"
    __table_args__ = (Index("ix_job_events_at", "at"),)

    job_id: Mapped[str] = mapped_column(
        String(NAME_LENGTH), ForeignKey("jobs.id"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    team: Mapped[str] = mapped_column(String(NAME_LENGTH))
    at: Mapped[float] = mapped_column(Double)
    phase: Mapped[str] = mapped_column(String(SHORT_LENGTH))
    cause: Mapped[str] = mapped_column(Text)
    allocation: Mapped[dict[str, Any] | None] = mapped_column(Json)
    """On an ``admitted`` event: what the admission booked (for usage reports)."""


class CycleRow(Base):
    """A scheduling cycle that recorded decisions; numbers its decisions."""

    __tablename__ = "cycles"

    number: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Double)
    admissions: Mapped[int] = mapped_column(Integer)
    preemptions: Mapped[int] = mapped_column(Integer)
    requeues: Mapped[int] = mapped_column(Integer)
    cancellations: Mapped[int] = mapped_column(Integer)
    diagnostics: Mapped[int] = mapped_column(Integer)


class DecisionRow(Base):
    """One decision of a cycle. Diagnostics are recorded when a job's reason changes."""

    __tablename__ = "decisions"

    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    cycle: Mapped[int] = mapped_column(ForeignKey("cycles.number"), index=True)
    at: Mapped[float] = mapped_column(Double)
    kind: Mapped[str] = mapped_column(String(SHORT_LENGTH))
    job_id: Mapped[str] = mapped_column(String(NAME_LENGTH), index=True)
    detail: Mapped[dict[str, Any]] = mapped_column(Json)


class PolicyVersionRow(Base):
    __tablename__ = "policy_versions"

    version: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=False)
    policy: Mapped[dict[str, Any]] = mapped_column(Json)
    actor: Mapped[str] = mapped_column(String(NAME_LENGTH))
    at: Mapped[float] = mapped_column(Double)


class NodeRow(Base):
    """The inventory. ``position`` keeps the order the inventory was given in."""

    __tablename__ = "nodes"

    name: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    position: Mapped[int] = mapped_column(Integer)
    spec: Mapped[dict[str, Any]] = mapped_column(Json)
    ready: Mapped[bool] = mapped_column(Boolean)
    unschedulable: Mapped[bool] = mapped_column(Boolean)
    updated_at: Mapped[float] = mapped_column(Double)
    write_seq: Mapped[int] = mapped_column(BigInteger, server_default="0")
    """Where the row's last write falls among all writes of node rows, which take turns
    (``inventory.next_write_seq``): the count of rows and the latest of these change with
    every write of the inventory, so an unchanged pair means an unchanged inventory."""


class ApiTokenRow(Base):
    """An API token: only the SHA-256 of the secret is kept."""

    __tablename__ = "api_tokens"
    __table_args__ = (Index("ix_api_tokens_name", "name", unique=True),)

    id: Mapped[str] = mapped_column(String(SHORT_LENGTH), primary_key=True)
    name: Mapped[str] = mapped_column(String(NAME_LENGTH))
    """Who the token's actions are recorded as: never given twice (revoked tokens keep it)."""
    token_hash: Mapped[str] = mapped_column(String(64), unique=True)
    role: Mapped[str] = mapped_column(String(SHORT_LENGTH))
    teams: Mapped[list[Any]] = mapped_column(Json)
    created_at: Mapped[float] = mapped_column(Double)
    revoked_at: Mapped[float | None] = mapped_column(Double)


class AuditRow(Base):
    """Append-only; ``id`` orders the entries."""

    __tablename__ = "audit_log"
    __table_args__ = (Index("ix_audit_log_at", "at"),)

    id: Mapped[int] = mapped_column(SerialId, primary_key=True, autoincrement=True)
    at: Mapped[float] = mapped_column(Double)
    actor: Mapped[str] = mapped_column(String(NAME_LENGTH))
    action: Mapped[str] = mapped_column(String(NAME_LENGTH))
    target: Mapped[str] = mapped_column(String(NAME_LENGTH))
    detail: Mapped[dict[str, Any]] = mapped_column(Json)


class TeamUsageRow(Base):
    """Each team's decayed fair-share usage (``topoq.core.fair_share.TeamUsage``): one row per
    team, replaced as the controller brings it forward."""

    __tablename__ = "team_usage"

    team: Mapped[str] = mapped_column(String(NAME_LENGTH), primary_key=True)
    share: Mapped[float] = mapped_column(Double)
    as_of: Mapped[float] = mapped_column(Double)
