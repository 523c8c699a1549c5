"""API tokens: the secret is handed out once and never stored."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import MetaData, select

from tests.store.conftest import StoreLocation
from topoq.domain.errors import InvalidInputError
from topoq.store import DuplicateToken, SqlStore, UnknownToken
from topoq.store.tokens import hash_token


def test_a_token_is_found_by_its_secret_until_it_is_revoked(store: SqlStore) -> None:
    secret, record = store.create_token("ci-bot", "member", ["vision", "llm"], now=10.0)
    assert record.teams == ("llm", "vision") and record.active
    assert store.token_for(secret) == record
    assert store.token_for(secret + "x") is None
    revoked = store.revoke_token(record.id, now=20.0)
    assert revoked.revoked_at == 20.0
    assert store.token_for(secret) is None
    assert store.revoke_token(record.id, now=30.0).revoked_at == 20.0, "the first revocation holds"
    assert store.tokens() == []
    assert store.tokens(include_revoked=True) == [revoked]


def test_each_token_is_different_and_long(store: SqlStore) -> None:
    secrets = {store.create_token(f"t{i}", "viewer")[0] for i in range(5)}
    assert len(secrets) == 5
    assert min(len(secret) for secret in secrets) >= 43  # 32 random bytes, base64url


def test_revoking_an_unknown_token_says_so(store: SqlStore) -> None:
    with pytest.raises(UnknownToken, match="nope"):
        store.revoke_token("nope")


def test_a_token_needs_a_name_and_a_role(store: SqlStore) -> None:
    with pytest.raises(InvalidInputError, match="name"):
        store.create_token("", "admin")
    with pytest.raises(InvalidInputError, match="role"):
        store.create_token("bot", "x" * 100)


def test_the_secret_is_nowhere_in_the_database(
    store: SqlStore, store_location: StoreLocation
) -> None:
    secret, _ = store.create_token("admin", "admin", now=1.0)
    everything = _every_value(store)
    assert hash_token(secret) in everything
    assert secret not in everything
    if store_location.url is None:  # SQLite: the raw bytes of the file and its WAL
        raw = b"".join(
            path.read_bytes() for path in Path(store_location.data_dir).glob("topoq.db*")
        )
        assert hash_token(secret).encode() in raw
        assert secret.encode() not in raw


def _every_value(store: SqlStore) -> str:
    """Every cell of every table, as text."""
    metadata = MetaData()
    metadata.reflect(store.database.engine)
    with store.database.engine.connect() as connection:
        return repr([connection.execute(select(table)).all() for table in metadata.sorted_tables])


def test_a_token_name_is_unique_for_all_time_revoked_tokens_included(store: SqlStore) -> None:
    _, first = store.create_token("alice", "member", ["llm"], now=1.0)
    with pytest.raises(DuplicateToken, match="alice"):
        store.create_token("alice", "viewer", ["llm"], now=2.0)
    store.revoke_token(first.id, now=3.0)
    with pytest.raises(DuplicateToken, match="alice"):
        store.create_token("alice", "member", ["llm"], now=4.0)
    assert [t.name for t in store.tokens(include_revoked=True)] == ["alice"]


@pytest.mark.parametrize("name", ["Alice", "made by bob", "a/b", "bot-", "x" * 64, "ünï"])
def test_a_token_name_follows_the_dns_label_rule(store: SqlStore, name: str) -> None:
    with pytest.raises(InvalidInputError, match="not a valid token name") as raised:
        store.create_token(name, "member", ["llm"])
    assert "DNS-1123 label" in (raised.value.hint or "")
    assert store.tokens(include_revoked=True) == []
