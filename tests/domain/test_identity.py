"""Token names: who an action is recorded as."""

from __future__ import annotations

import pytest

from topoq.domain.errors import InvalidInputError
from topoq.domain.identity import (
    check_issuable_token_name,
    is_reserved_token_name,
    next_admin_token_name,
)
from topoq.engine.intake import SYSTEM


def test_every_name_the_control_plane_writes_as_an_actor_is_reserved() -> None:
    assert is_reserved_token_name(SYSTEM)
    assert is_reserved_token_name(next_admin_token_name(()))
    assert is_reserved_token_name(next_admin_token_name({"admin", "admin-2"}))
    assert not is_reserved_token_name("administrator")


def test_a_replacement_admin_token_takes_the_first_name_never_given() -> None:
    assert next_admin_token_name({"alice"}) == "admin"
    assert next_admin_token_name({"admin", "admin-2", "admin-4"}) == "admin-3"


@pytest.mark.parametrize("name", ["topoq", "system", "admin-9", 7, None])
def test_a_reserved_or_malformed_name_is_refused_naming_the_field(name: object) -> None:
    with pytest.raises(InvalidInputError) as raised:
        check_issuable_token_name(name, where="body.name")
    assert raised.value.where == "body.name"
