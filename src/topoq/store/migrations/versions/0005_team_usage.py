"""Each team's decayed fair-share usage, so that usage history survives a restart.

Revision ID: 0005
Revises: 0004
Create Date: 2026-12-01

One row per team: the decayed average of its borrowed fraction (``share``) as of ``as_of``
(epoch seconds); see ``topoq.core.fair_share``. Existing databases start with no history.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME = 253


def upgrade() -> None:
    op.create_table(
        "team_usage",
        sa.Column("team", sa.String(NAME), nullable=False),
        sa.Column("share", sa.Double(), nullable=False),
        sa.Column("as_of", sa.Double(), nullable=False),
        sa.PrimaryKeyConstraint("team", name=op.f("pk_team_usage")),
    )


def downgrade() -> None:
    op.drop_table("team_usage")
