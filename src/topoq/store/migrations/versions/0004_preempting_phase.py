"""Victims are stopped before their room is given away: the transient ``preempted`` phase
becomes ``preempting`` (held until the executor reports the pods gone), and a job being
evicted records the job it is evicted for (``jobs.preempted_for``).

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

A stored job whose current phase is ``preempted`` was on its way back to the queue (the old
controller requeued victims in the same transaction, so such a row is rare): it becomes
``pending``, without an allocation. History entries ``preempted`` say when a job was evicted:
they become ``preempting`` entries, which mean the same, so usage reports keep counting them.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME_LENGTH = 253

_jobs = sa.table(
    "jobs",
    sa.column("phase", sa.String),
    sa.column("allocation", sa.JSON),
    sa.column("version", sa.Integer),
)
_job_events = sa.table("job_events", sa.column("phase", sa.String))


def upgrade() -> None:
    with op.batch_alter_table("jobs") as batch:
        batch.add_column(sa.Column("preempted_for", sa.String(NAME_LENGTH), nullable=True))
    _rename_phase("preempted", "preempting")


def downgrade() -> None:
    _rename_phase("preempting", "preempted")
    with op.batch_alter_table("jobs") as batch:
        batch.drop_column("preempted_for")


def _rename_phase(old: str, new: str) -> None:
    """Jobs in phase ``old`` go back to the queue; history entries ``old`` become ``new``."""
    op.execute(
        _jobs.update()
        .where(_jobs.c.phase == old)
        .values(phase="pending", allocation=None, version=_jobs.c.version + 1)
    )
    op.execute(_job_events.update().where(_job_events.c.phase == old).values(phase=new))
