"""Indexes that cover the job list's filters: counting the jobs of a team in a phase, or of a
user, reads index entries only instead of the rows (with their JSON specs) that one filter's
index points to.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

``ix_jobs_team`` becomes ``ix_jobs_team_phase`` (team, phase) and ``ix_jobs_user_name``
becomes ``ix_jobs_user_name_team_phase`` (user_name, team, phase); ``ix_jobs_phase`` stays.
"""

from __future__ import annotations

from collections.abc import Sequence

from alembic import op

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_jobs_team_phase", "jobs", ["team", "phase"], unique=False)
    op.create_index(
        "ix_jobs_user_name_team_phase", "jobs", ["user_name", "team", "phase"], unique=False
    )
    op.drop_index("ix_jobs_team", table_name="jobs")
    op.drop_index("ix_jobs_user_name", table_name="jobs")


def downgrade() -> None:
    op.create_index("ix_jobs_team", "jobs", ["team"], unique=False)
    op.create_index("ix_jobs_user_name", "jobs", ["user_name"], unique=False)
    op.drop_index("ix_jobs_user_name_team_phase", table_name="jobs")
    op.drop_index("ix_jobs_team_phase", table_name="jobs")
