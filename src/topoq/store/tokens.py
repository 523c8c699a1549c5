"""API tokens: the secret is shown once, when it is made; the store keeps only its SHA-256.

Tokens are 256 random bits (``secrets.token_urlsafe(32)``), so a plain hash without salt or
stretching is enough: nobody can guess a preimage, and lookups stay one indexed query.

A token's name is who its actions are recorded as (``topoq.domain.identity``): a DNS-1123
label, never given twice — the unique index on ``name`` covers revoked tokens too.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Collection
from typing import Any

from sqlalchemy import Row, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from topoq.domain.errors import InvalidInputError
from topoq.domain.identity import check_token_name
from topoq.store.errors import DuplicateToken, UnknownToken
from topoq.store.records import TokenRecord
from topoq.store.schema import NAME_LENGTH, SHORT_LENGTH, ApiTokenRow

TOKEN_BYTES = 32
TOKEN_COLUMNS = (
    ApiTokenRow.id,
    ApiTokenRow.name,
    ApiTokenRow.role,
    ApiTokenRow.teams,
    ApiTokenRow.created_at,
    ApiTokenRow.revoked_at,
)


def hash_token(plaintext: str) -> str:
    return hashlib.sha256(plaintext.encode()).hexdigest()


def insert_token(
    connection: Connection, name: str, role: str, teams: Collection[str], now: float
) -> tuple[str, TokenRecord]:
    check_token_name(name, where="token name")
    _check_text("role", role, SHORT_LENGTH)
    if name_taken(connection, name):
        raise DuplicateToken(name)
    for team in teams:
        _check_text("team", team, NAME_LENGTH)
    plaintext = secrets.token_urlsafe(TOKEN_BYTES)
    record = TokenRecord(secrets.token_hex(8), name, role, tuple(sorted(set(teams))), now)
    row = {
        "id": record.id,
        "name": name,
        "token_hash": hash_token(plaintext),
        "role": role,
        "teams": list(record.teams),
        "created_at": now,
        "revoked_at": None,
    }
    try:
        connection.execute(insert(ApiTokenRow).values(row))
    except IntegrityError:  # another writer took the name since name_taken looked
        raise DuplicateToken(name) from None
    return plaintext, record


def name_taken(connection: Connection, name: str) -> bool:
    """Whether any token, revoked ones included, has this name."""
    query = select(ApiTokenRow.id).where(ApiTokenRow.name == name).limit(1)
    return connection.execute(query).first() is not None


def _check_text(field: str, value: str, limit: int) -> None:
    if not value or len(value) > limit:
        raise InvalidInputError(
            f"the token's {field} is {value!r}",
            where=f"token {field}",
            hint=f"give 1 to {limit} characters",
        )


def find_token(connection: Connection, plaintext: str) -> TokenRecord | None:
    """The active token with this secret, or None (unknown or revoked)."""
    row = connection.execute(
        select(*TOKEN_COLUMNS).where(
            ApiTokenRow.token_hash == hash_token(plaintext), ApiTokenRow.revoked_at.is_(None)
        )
    ).one_or_none()
    return None if row is None else token_from_row(row)


def mark_revoked(connection: Connection, token_id: str, now: float) -> TokenRecord:
    """Revoke a token (revoking twice keeps the first time); raises UnknownToken."""
    connection.execute(
        update(ApiTokenRow)
        .where(ApiTokenRow.id == token_id, ApiTokenRow.revoked_at.is_(None))
        .values(revoked_at=now)
    )
    row = connection.execute(select(*TOKEN_COLUMNS).where(ApiTokenRow.id == token_id)).one_or_none()
    if row is None:
        raise UnknownToken(f"no API token has the id {token_id!r}")
    return token_from_row(row)


def token_from_row(row: Row[Any]) -> TokenRecord:
    return TokenRecord(
        id=row.id,
        name=row.name,
        role=row.role,
        teams=tuple(row.teams),
        created_at=row.created_at,
        revoked_at=row.revoked_at,
    )
