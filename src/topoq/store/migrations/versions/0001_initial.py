"""The first schema: jobs and their history, cycles and decisions, policy versions, nodes, API
tokens and the audit log.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

A migration is frozen in time: it spells its columns out instead of importing
``topoq.store.schema``, which moves on with later migrations.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 253
SHORT = 32


def _json() -> sa.JSON:
    return sa.JSON(none_as_null=True)


def _serial() -> sa.types.TypeEngine[int]:
    return sa.BigInteger().with_variant(sa.Integer(), "sqlite")


def upgrade() -> None:
    _create_jobs()
    _create_cycles_and_decisions()
    _create_governance_and_inventory()
    _create_access_and_audit()


def _create_jobs() -> None:
    op.create_table(
        "jobs",
        sa.Column("id", sa.String(NAME), nullable=False),
        sa.Column("team", sa.String(NAME), nullable=False),
        sa.Column("user_name", sa.String(NAME), nullable=True),
        sa.Column("phase", sa.String(SHORT), nullable=False),
        sa.Column("priority_class", sa.String(NAME), nullable=True),
        sa.Column("submitted_at", sa.Double(), nullable=False),
        sa.Column("held", sa.Boolean(), nullable=False),
        sa.Column("failures", sa.Integer(), nullable=False),
        sa.Column("preemptions", sa.Integer(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("history_length", sa.Integer(), nullable=False),
        sa.Column("spec", _json(), nullable=False),
        sa.Column("allocation", _json(), nullable=True),
        sa.Column("diagnostic", _json(), nullable=True),
        sa.Column("admitted_at", sa.Double(), nullable=True),
        sa.Column("started_at", sa.Double(), nullable=True),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    for column in ("phase", "submitted_at", "team", "user_name"):
        op.create_index(op.f(f"ix_jobs_{column}"), "jobs", [column], unique=False)
    op.create_table(
        "job_events",
        sa.Column("job_id", sa.String(NAME), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("team", sa.String(NAME), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("phase", sa.String(SHORT), nullable=False),
        sa.Column("cause", sa.Text(), nullable=False),
        sa.Column("allocation", _json(), nullable=True),
        sa.ForeignKeyConstraint(["job_id"], ["jobs.id"], name=op.f("fk_job_events_job_id_jobs")),
        sa.PrimaryKeyConstraint("job_id", "seq", name=op.f("pk_job_events")),
    )
    op.create_index("ix_job_events_at", "job_events", ["at"], unique=False)


def _create_cycles_and_decisions() -> None:
    op.create_table(
        "cycles",
        sa.Column("number", _serial(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("admissions", sa.Integer(), nullable=False),
        sa.Column("preemptions", sa.Integer(), nullable=False),
        sa.Column("requeues", sa.Integer(), nullable=False),
        sa.Column("cancellations", sa.Integer(), nullable=False),
        sa.Column("diagnostics", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("number", name=op.f("pk_cycles")),
    )
    op.create_table(
        "decisions",
        sa.Column("id", _serial(), autoincrement=True, nullable=False),
        sa.Column("cycle", _serial(), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("kind", sa.String(SHORT), nullable=False),
        sa.Column("job_id", sa.String(NAME), nullable=False),
        sa.Column("detail", _json(), nullable=False),
        sa.ForeignKeyConstraint(
            ["cycle"], ["cycles.number"], name=op.f("fk_decisions_cycle_cycles")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_decisions")),
    )
    op.create_index(op.f("ix_decisions_cycle"), "decisions", ["cycle"], unique=False)
    op.create_index(op.f("ix_decisions_job_id"), "decisions", ["job_id"], unique=False)


def _create_governance_and_inventory() -> None:
    op.create_table(
        "policy_versions",
        sa.Column("version", sa.Integer(), autoincrement=False, nullable=False),
        sa.Column("policy", _json(), nullable=False),
        sa.Column("actor", sa.String(NAME), nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("version", name=op.f("pk_policy_versions")),
    )
    op.create_table(
        "nodes",
        sa.Column("name", sa.String(NAME), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("spec", _json(), nullable=False),
        sa.Column("ready", sa.Boolean(), nullable=False),
        sa.Column("unschedulable", sa.Boolean(), nullable=False),
        sa.Column("updated_at", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_nodes")),
    )


def _create_access_and_audit() -> None:
    op.create_table(
        "api_tokens",
        sa.Column("id", sa.String(SHORT), nullable=False),
        sa.Column("name", sa.String(NAME), nullable=False),
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("role", sa.String(SHORT), nullable=False),
        sa.Column("teams", _json(), nullable=False),
        sa.Column("created_at", sa.Double(), nullable=False),
        sa.Column("revoked_at", sa.Double(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_tokens")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_api_tokens_token_hash")),
    )
    op.create_table(
        "audit_log",
        sa.Column("id", _serial(), autoincrement=True, nullable=False),
        sa.Column("at", sa.Double(), nullable=False),
        sa.Column("actor", sa.String(NAME), nullable=False),
        sa.Column("action", sa.String(NAME), nullable=False),
        sa.Column("target", sa.String(NAME), nullable=False),
        sa.Column("detail", _json(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index("ix_audit_log_at", "audit_log", ["at"], unique=False)


def downgrade() -> None:
    for table in (
        "audit_log",
        "api_tokens",
        "nodes",
        "policy_versions",
        "decisions",
        "cycles",
        "job_events",
        "jobs",
    ):
        op.drop_table(table)
