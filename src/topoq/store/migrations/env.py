"""Alembic's environment for topoq's schema. Migrations run programmatically: ``open_store``
(``topoq.store.database.migrate``) passes an open connection in ``config.attributes``."""

from __future__ import annotations

from alembic import context
from sqlalchemy.engine import Connection

from topoq.store.schema import Base


def run_migrations(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=Base.metadata,
        render_as_batch=connection.dialect.name == "sqlite",  # SQLite alters by copying tables
        compare_type=True,
    )
    with context.begin_transaction():
        context.run_migrations()


def main() -> None:
    connection = context.config.attributes.get("connection")
    if context.is_offline_mode() or not isinstance(connection, Connection):
        raise RuntimeError(
            "topoq's migrations run on an open connection: use topoq.store.open_store(url), "
            "or pass one in Config.attributes['connection']"
        )
    run_migrations(connection)


main()
