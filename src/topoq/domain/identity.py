"""Who an action is recorded as: the name of the API token that acted, or the control plane.

The audit log's actors, a job's ``user`` and causes such as "cancelled by dana" are token
names, so a token name must identify one token for all time: names follow the DNS-1123 label
rule (``topoq.domain.names``), the store never gives a name twice (revoked tokens keep theirs),
and nobody may take a name the control plane writes for itself — ``topoq`` (its own changes),
``system``, ``admin`` (the server's first admin token) and the prefixes of the names it makes
later (``admin-2`` when the admin token file had to be replaced).
"""

from __future__ import annotations

from collections.abc import Collection

from topoq.domain.errors import InvalidInputError
from topoq.domain.names import check_label_name

CONTROL_PLANE_ACTOR = "topoq"
"""The actor of changes the control plane makes itself (``topoq.engine.intake.SYSTEM``)."""
ADMIN_TOKEN_NAME = "admin"
"""The name of the admin token the server makes on its first start."""
RESERVED_TOKEN_NAMES = frozenset({CONTROL_PLANE_ACTOR, ADMIN_TOKEN_NAME, "system", "root"})
RESERVED_TOKEN_PREFIXES = ("topoq-", "system-", "admin-")
TOKEN_NAME = "token name"


def check_token_name(value: object, *, where: str) -> str:
    """``value`` if it is a valid token name (a DNS-1123 label)."""
    return check_label_name(value, what=TOKEN_NAME, where=where)


def is_reserved_token_name(name: str) -> bool:
    return name in RESERVED_TOKEN_NAMES or name.startswith(RESERVED_TOKEN_PREFIXES)


def check_issuable_token_name(value: object, *, where: str) -> str:
    """``value`` if a user may give it to a new token: valid and not reserved."""
    name = check_token_name(value, where=where)
    if is_reserved_token_name(name):
        reserved = ", ".join(sorted(RESERVED_TOKEN_NAMES))
        prefixes = ", ".join(f"{prefix}…" for prefix in RESERVED_TOKEN_PREFIXES)
        raise InvalidInputError(
            f"the token name {name!r} is reserved for the control plane",
            where=where,
            hint=f"choose another name; reserved: {reserved} and {prefixes}",
        )
    return name


def next_admin_token_name(taken: Collection[str]) -> str:
    """``admin``, else the first of ``admin-2``, ``admin-3``, … that no token has had."""
    if ADMIN_TOKEN_NAME not in taken:
        return ADMIN_TOKEN_NAME
    number = 2
    while f"{ADMIN_TOKEN_NAME}-{number}" in taken:
        number += 1
    return f"{ADMIN_TOKEN_NAME}-{number}"
