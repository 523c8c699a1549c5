"""A job remembers the nodes it held when a node failure requeued it, so that its restart can
prefer them (placement keeps a gang in its domains where they still have room).

Revision ID: 0006
Revises: 0005
Create Date: 2026-12-01

``jobs.previous_nodes``: a JSON list of node names, or null (never requeued for a node
failure). Existing jobs get null.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("previous_nodes", sa.JSON(none_as_null=True), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "previous_nodes")
