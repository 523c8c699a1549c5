"""Each job row records where its last write falls among all writes of job rows, so that the
controller reads only the jobs that changed since its last read instead of every unfinished
job's id and version each step; each node row likewise, so that an unchanged inventory is known
by two figures instead of read whole.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-02

``jobs.write_seq`` (indexed) and ``nodes.write_seq``: big integers; existing rows get 0 (a
reader that has seen nothing reads them all).
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "jobs", sa.Column("write_seq", sa.BigInteger(), nullable=False, server_default="0")
    )
    op.create_index("ix_jobs_write_seq", "jobs", ["write_seq"])
    op.add_column(
        "nodes", sa.Column("write_seq", sa.BigInteger(), nullable=False, server_default="0")
    )


def downgrade() -> None:
    op.drop_column("nodes", "write_seq")
    op.drop_index("ix_jobs_write_seq", table_name="jobs")
    op.drop_column("jobs", "write_seq")
