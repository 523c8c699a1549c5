"""A PostgreSQL URL where psycopg cannot be imported: bad input that names the extra."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from topoq.domain.errors import InvalidInputError
from topoq.store.database import connect, resolve_url


def test_a_postgresql_url_without_the_driver_names_the_extra_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "psycopg", None)  # an import of it fails, as if absent
    url = resolve_url("postgresql://topoq@127.0.0.1:1/topoq", tmp_path)
    with pytest.raises(InvalidInputError) as raised:
        connect(url)
    message = str(raised.value)
    assert "psycopg" in message and "pip install 'topoq[postgres]'" in message
    assert "\n" not in message
