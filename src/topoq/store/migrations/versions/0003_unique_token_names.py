"""Token names are unique for all time: the audit log's actors and jobs' ``user`` are token
names, so two tokens (revoked or not) may not share one.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

Existing tokens that share a name keep it for the oldest (by creation time, then id); each
other one is renamed ``name~id``. So is a token named ``topoq`` or ``system``, the names the
control plane writes as its own actor. ``~`` is outside the token-name grammar, so no new token
can take a renamed one's name. Then a unique index ``ix_api_tokens_name`` holds the rule.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

NAME_LENGTH = 253
ID_LENGTH = 16
CONTROL_PLANE_NAMES = frozenset({"topoq", "system"})

_tokens = sa.table(
    "api_tokens",
    sa.column("id", sa.String),
    sa.column("name", sa.String),
    sa.column("created_at", sa.Double),
)


def upgrade() -> None:
    connection = op.get_bind()
    rows = connection.execute(
        sa.select(_tokens.c.id, _tokens.c.name).order_by(_tokens.c.created_at, _tokens.c.id)
    ).all()
    seen: set[str] = set()
    for token_id, name in rows:
        if name in seen or name in CONTROL_PLANE_NAMES:
            kept = name[: NAME_LENGTH - ID_LENGTH - 1]
            connection.execute(
                sa.update(_tokens).where(_tokens.c.id == token_id).values(name=f"{kept}~{token_id}")
            )
        seen.add(name)
    op.create_index("ix_api_tokens_name", "api_tokens", ["name"], unique=True)


def downgrade() -> None:
    op.drop_index("ix_api_tokens_name", table_name="api_tokens")
