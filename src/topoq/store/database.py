"""Which database, how to connect to it, and bringing its schema up to date.

SQLite (the default, a file in the data directory) runs in WAL mode with ``synchronous=FULL``
and a busy timeout; write transactions start with ``BEGIN IMMEDIATE`` so that two writers queue
for the lock instead of failing half-way. PostgreSQL is reached through psycopg 3; its read
transactions run at REPEATABLE READ so that a job row and its history come from one snapshot,
its writes at READ COMMITTED, and single reads in AUTOCOMMIT on a pool of their own. No
connection is pinged at checkout (``topoq.store.transactions`` retries a dropped one).
"""

from __future__ import annotations

import re
import threading
from contextlib import AbstractContextManager, ExitStack, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from alembic import command
from alembic.config import Config
from alembic.util.exc import CommandError
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import URL, Connection, make_url
from sqlalchemy.exc import ArgumentError, OperationalError
from sqlalchemy.pool import ConnectionPoolEntry, QueuePool

from topoq.domain.errors import InvalidInputError
from topoq.store.errors import StoreUnavailable, first_line
from topoq.store.process_lock import ProcessWriteLock

SQLITE_FILE_NAME = "topoq.db"
BUSY_TIMEOUT_S = 30.0
SQLITE_POOL_SIZE = 16
"""Connections kept open: about as many as the API's worker threads that read at once (a new
SQLite connection costs its PRAGMAs; SQLAlchemy's default keeps 5 and closes the rest)."""
SQLITE_POOL_OVERFLOW = 48
POSTGRES_POOL_SIZE = 10
POSTGRES_POOL_OVERFLOW = 30
MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
WRITE_OPTION: Final = "topoq_write"
"""Execution option that marks a connection for write transactions (SQLite: BEGIN IMMEDIATE)."""
NO_TRANSACTION_OPTION: Final = "topoq_no_transaction"
"""Execution option for SQLite connections whose statements run without BEGIN (each its own
implicit transaction), like PostgreSQL's AUTOCOMMIT."""
MIGRATION_LOCK_KEY = 0x7070_7130
"""PostgreSQL advisory lock held while migrating, so two servers starting at once take turns."""

POSTGRES_SCHEMES = frozenset({"postgresql", "postgres", "postgresql+psycopg"})
ALLOWED_URLS = (
    "use postgresql://USER:PASSWORD@HOST:PORT/DATABASE, or sqlite:///PATH/TO/FILE.db, "
    "or leave the database out for the embedded SQLite file in the data directory"
)
POSTGRES_EXTRA = "install it with: pip install 'topoq[postgres]'"
_PASSWORD = re.compile(r"(//[^:/@]*):[^@/]*@")


@dataclass(frozen=True)
class Database:
    """A connected database: ``reader`` for read transactions, ``writer`` for write ones,
    ``querier`` for reads without a transaction (no BEGIN and COMMIT: a single statement is
    one round trip).

    ``write_lock`` is held around every write transaction. On SQLite, which has one writer at
    a time, it queues the writers of every topoq process in order (``ProcessWriteLock``);
    without it they would wait in SQLite's busy handler, which polls with sleeps of up to
    100 ms. PostgreSQL locks rows itself and needs none."""

    engine: Engine
    reader: Engine
    writer: Engine
    querier: Engine
    write_lock: AbstractContextManager[object] = field(default_factory=nullcontext)

    def dispose(self) -> None:
        """Close every pooled connection."""
        for engine in self._pools():
            engine.dispose()

    def open_connections(self) -> None:
        """Fill every pool up to its kept size now, so that the first burst of requests does
        not open (and configure) a connection per request at once."""
        for engine in self._pools():
            size = engine.pool.size() if isinstance(engine.pool, QueuePool) else 1
            with ExitStack() as stack:
                for _ in range(size):
                    stack.enter_context(engine.connect()).exec_driver_sql("SELECT 1")

    def _pools(self) -> list[Engine]:
        return list({id(e.engine): e.engine for e in (self.engine, self.querier)}.values())

    @property
    def backend(self) -> str:
        return self.engine.dialect.name

    @property
    def display_url(self) -> str:
        return self.engine.url.render_as_string(hide_password=True)


def redact(url: str) -> str:
    """The URL with any password replaced by ``***``."""
    return _PASSWORD.sub(r"\1:***@", url)


def resolve_url(url: str | None, data_dir: Path) -> URL:
    """The SQLAlchemy URL for ``--database``: None means ``data_dir/topoq.db``."""
    if url is None or not url.strip():
        return URL.create("sqlite", database=str(data_dir / SQLITE_FILE_NAME))
    try:
        parsed = make_url(url.strip())
    except ArgumentError:
        raise InvalidInputError(
            f"cannot read the database URL {redact(url)!r}", where="--database", hint=ALLOWED_URLS
        ) from None
    if parsed.drivername in POSTGRES_SCHEMES:
        return parsed.set(drivername="postgresql+psycopg")
    if parsed.drivername == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise InvalidInputError(
                "an in-memory SQLite database keeps nothing",
                where="--database",
                hint=ALLOWED_URLS,
            )
        return parsed
    raise InvalidInputError(
        f"unsupported database URL scheme {parsed.drivername!r}",
        where="--database",
        hint=ALLOWED_URLS,
    )


def connect(url: URL) -> Database:
    """Engines for ``url`` (resolved by ``resolve_url``); the database is not touched yet."""
    if url.get_backend_name() == "sqlite":
        if url.database:
            Path(url.database).parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            url,
            connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_S},
            pool_size=SQLITE_POOL_SIZE,
            max_overflow=SQLITE_POOL_OVERFLOW,
        )
        _configure_sqlite(engine)
        writer = engine.execution_options(**{WRITE_OPTION: True})
        lock_file = Path(f"{url.database}.write-lock") if url.database else None
        lock = ProcessWriteLock(lock_file) if lock_file is not None else threading.Lock()
        querier = engine.execution_options(**{NO_TRANSACTION_OPTION: True})
        return Database(engine, engine, writer, querier, write_lock=lock)
    try:
        engine = _postgres_engine(url, isolation_level="REPEATABLE READ")  # reads: one snapshot
    except ImportError as error:  # create_engine imports the driver
        raise InvalidInputError(
            f"a PostgreSQL database needs the psycopg driver, which cannot be imported "
            f"({first_line(error)})",
            where="--database / TOPOQ_DATABASE_URL",
            hint=POSTGRES_EXTRA,
        ) from None
    writer = engine.execution_options(isolation_level="READ COMMITTED")
    autocommit = _postgres_engine(url, isolation_level="AUTOCOMMIT", pool_reset_on_return=None)
    return Database(engine, engine, writer, autocommit)


def _postgres_engine(url: URL, **options: Any) -> Engine:
    """No ``pool_pre_ping`` (a round trip per checkout): ``Transactions`` runs work again on a
    fresh connection when the server dropped the one it had. Connections keep the engine's
    isolation level; a checkout that asks for another one switches it and switches it back on
    return, which costs more than a one-row query. So reads (the most frequent) run at the
    engine's level, writes switch, and reads without a transaction have a pool of their own
    whose connections stay in AUTOCOMMIT."""
    return create_engine(
        url,
        pool_size=POSTGRES_POOL_SIZE,
        max_overflow=POSTGRES_POOL_OVERFLOW,
        connect_args={"client_encoding": "utf8"},
        **options,
    )


def _configure_sqlite(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        dbapi_connection.isolation_level = None  # topoq issues BEGIN itself (below)
        cursor = dbapi_connection.cursor()
        cursor.execute("PRAGMA journal_mode=WAL")
        cursor.execute("PRAGMA synchronous=FULL")
        cursor.execute("PRAGMA foreign_keys=ON")
        cursor.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT_S * 1000)}")
        cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(connection: Connection) -> None:
        options = connection.get_execution_options()
        if options.get(NO_TRANSACTION_OPTION, False):
            return
        connection.exec_driver_sql("BEGIN IMMEDIATE" if options.get(WRITE_OPTION) else "BEGIN")


def migrate(database: Database) -> None:
    """Apply every Alembic migration the database lacks (nothing when it is up to date)."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    try:
        with database.writer.begin() as connection:
            if database.backend == "postgresql":
                connection.exec_driver_sql(f"SELECT pg_advisory_xact_lock({MIGRATION_LOCK_KEY})")
            config.attributes["connection"] = connection
            command.upgrade(config, "head")
    except OperationalError as error:
        raise StoreUnavailable(
            f"cannot open the database {database.display_url}: {first_line(error)}"
        ) from None
    except CommandError as error:
        raise StoreUnavailable(
            f"the database {database.display_url} has a schema this topoq does not know "
            f"({error}); it was probably written by a newer topoq, so upgrade topoq"
        ) from None
