"""Alembic migrations build exactly the ORM schema, on an empty database and again on re-open."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.config import Config
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import insert, inspect, text
from sqlalchemy.engine import Connection

from tests.store.conftest import StoreLocation
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import JobId, JobPhase, JobSpec
from topoq.store import DuplicateToken, SqlStore, StoreUnavailable, open_store
from topoq.store.codec import encode_job_spec
from topoq.store.database import MIGRATIONS_DIR, connect, resolve_url
from topoq.store.schema import ApiTokenRow, Base, JobEventRow, JobRow
from topoq.testing.governance import job

TABLES = {
    "jobs",
    "job_events",
    "cycles",
    "decisions",
    "policy_versions",
    "nodes",
    "api_tokens",
    "audit_log",
    "team_usage",
    "alembic_version",
}


def test_the_migrated_schema_is_the_orm_schema(store: SqlStore) -> None:
    with store.database.engine.connect() as connection:
        context = MigrationContext.configure(connection, opts={"compare_type": True})
        assert compare_metadata(context, Base.metadata) == []


def test_opening_an_empty_database_creates_every_table_at_the_head_revision(
    store: SqlStore,
) -> None:
    assert set(inspect(store.database.engine).get_table_names()) == TABLES
    with store.database.engine.connect() as connection:
        assert (
            connection.execute(text("SELECT version_num FROM alembic_version")).scalar()
            == _head_revision()
        )


def _head_revision() -> str | None:
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    return ScriptDirectory.from_config(config).get_current_head()


def test_reopening_keeps_the_data_and_migrates_nothing(store_location: StoreLocation) -> None:
    with store_location.open() as first:
        first.add_job(job("a", "llm").spec, actor="alice", now=1.0)
    for _ in range(2):
        with store_location.open() as again:
            assert list(again.jobs()) == ["a"]


def test_a_database_of_the_first_revision_is_upgraded_and_keeps_its_jobs(
    store_location: StoreLocation,
) -> None:
    with _database_at(store_location, "0001") as connection:
        _old_job(connection, replace(job("a", "llm").spec, user="ann"), "pending", ["pending"])
    with store_location.open() as upgraded:
        assert upgraded.count_jobs(team="llm", user="ann") == 1
        indexes = {ix["name"] for ix in inspect(upgraded.database.engine).get_indexes("jobs")}
        assert {"ix_jobs_team_phase", "ix_jobs_user_name_team_phase"} <= indexes
        assert not {"ix_jobs_team", "ix_jobs_user_name"} & indexes


@contextmanager
def _database_at(store_location: StoreLocation, revision: str) -> Iterator[Connection]:
    """A connection (in one transaction) to the store's database migrated up to ``revision``
    only, closed afterwards so that the store opens it as an older topoq left it."""
    database = connect(resolve_url(store_location.url, store_location.data_dir))
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with database.writer.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, revision)
        yield connection
    database.dispose()


def _old_job(connection: Connection, spec: JobSpec, phase: str, history: list[str]) -> None:
    """A job as topoq before 0004 wrote it (no ``preempted_for`` column yet)."""
    connection.execute(
        insert(JobRow.__table__).values(
            id=spec.id, team=spec.team, user_name=spec.user, phase=phase, priority_class=None,
            submitted_at=1.0, held=False, failures=0, preemptions=history.count("preempted"),
            attempt=history.count("admitted"), history_length=len(history),
            spec=encode_job_spec(spec), allocation=None, diagnostic=None, admitted_at=None,
            started_at=None, updated_at=1.0, version=1,
        )
    )  # fmt: skip
    for seq, past in enumerate(history):
        connection.execute(
            insert(JobEventRow.__table__).values(
                job_id=spec.id, seq=seq, team=spec.team, at=float(seq), phase=past,
                cause=past, allocation=None,
            )
        )  # fmt: skip


def test_jobs_stored_with_the_old_preempted_phase_load_after_the_upgrade(
    store_location: StoreLocation,
) -> None:
    """Before 0004 a victim went through a transient ``preempted`` phase: a row left in it is
    back in the queue, and its history says when it was evicted (``preempting``)."""
    old = ["pending", "admitted", "running", "preempted"]
    with _database_at(store_location, "0003") as connection:
        _old_job(connection, job("cut", "llm").spec, "preempted", old)
        _old_job(connection, job("back", "llm").spec, "pending", [*old, "pending"])
    with store_location.open() as upgraded:
        jobs = upgraded.jobs()
        assert {j.id: j.phase for j in jobs.values()} == {
            "cut": JobPhase.PENDING,
            "back": JobPhase.PENDING,
        }
        assert [c.phase for c in jobs[JobId("back")].history][3] is JobPhase.PREEMPTING
        assert jobs[JobId("cut")].preemptions == 1 and jobs[JobId("cut")].allocation is None
        assert not upgraded.holding_jobs()


def test_tokens_that_share_a_name_are_told_apart_by_the_upgrade(
    store_location: StoreLocation,
) -> None:
    """Before 0003 two tokens could share a name (and one could be named like the control
    plane): the oldest keeps the name, the others get ``name~id``, which no new name can take."""
    database = connect(resolve_url(store_location.url, store_location.data_dir))
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    with database.writer.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "0002")
    with database.writer.begin() as connection:  # as topoq before 0003 could write them
        for token_id, name, at in [
            ("t1", "alice", 1.0), ("t2", "alice", 2.0), ("t3", "alice", 3.0),
            ("t4", "bob", 4.0), ("t5", "topoq", 5.0),
        ]:  # fmt: skip
            connection.execute(
                insert(ApiTokenRow).values(
                    id=token_id, name=name, token_hash=f"hash-{token_id}", role="member",
                    teams=["llm"], created_at=at, revoked_at=None,
                )
            )  # fmt: skip
    database.dispose()
    with store_location.open() as upgraded:
        names = {t.id: t.name for t in upgraded.tokens(include_revoked=True)}
        assert names == {
            "t1": "alice", "t2": "alice~t2", "t3": "alice~t3", "t4": "bob", "t5": "topoq~t5",
        }  # fmt: skip
        with pytest.raises(DuplicateToken):
            upgraded.create_token("bob", "member", ["llm"])


def test_sqlite_runs_in_wal_mode_in_the_data_directory(tmp_path: Path) -> None:
    with (
        open_store(None, tmp_path / "data") as store,
        store.database.engine.connect() as connection,
    ):
        assert connection.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("PRAGMA busy_timeout").scalar() == 30000
    assert (tmp_path / "data" / "topoq.db").exists()


def test_a_sqlite_url_names_the_file(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path}/elsewhere.db", tmp_path / "unused"):
        pass
    assert (tmp_path / "elsewhere.db").exists()


@pytest.mark.parametrize(
    "url",
    ["mysql://root:hunter2@db/topoq", "not a url", "sqlite:///:memory:", "sqlite://"],
)
def test_a_bad_url_names_the_schemes_allowed(url: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidInputError, match="postgresql://") as raised:
        open_store(url, tmp_path)
    assert "hunter2" not in str(raised.value)


def test_an_unreachable_postgresql_is_a_clear_error_without_the_password(tmp_path: Path) -> None:
    url = "postgresql://topoq:hunter2@127.0.0.1:1/topoq"
    with pytest.raises(StoreUnavailable, match="cannot open the database") as raised:
        open_store(url, tmp_path)
    assert "hunter2" not in str(raised.value)


def test_a_database_from_a_newer_topoq_is_refused_with_a_hint(tmp_path: Path) -> None:
    with open_store(None, tmp_path) as store, store.database.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(StoreUnavailable, match="newer topoq"):
        open_store(None, tmp_path)
