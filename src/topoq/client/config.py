"""Where the server is and which token to use: options, then environment, then the config file.

Order: ``--server``/``--token`` options; ``TOPOQ_SERVER``, ``TOPOQ_TOKEN`` (or
``TOPOQ_TOKEN_FILE``); the file named by ``TOPOQ_CONFIG`` or ``~/.config/topoq/config.yaml``
(``server:``, ``token:`` or ``token_file:``); finally ``http://127.0.0.1:8750`` and the admin
token a local server writes to ``.topoq/admin-token``."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import yaml

from topoq.domain.errors import InvalidInputError

DEFAULT_SERVER = "http://127.0.0.1:8750"
LOCAL_ADMIN_TOKEN = Path(".topoq") / "admin-token"


@dataclass(frozen=True)
class ClientSettings:
    server: str
    token: str | None
    token_source: str


def resolve_settings(
    server: str | None = None,
    token: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ClientSettings:
    env = os.environ if environ is None else environ
    config = _config_file(env)
    chosen_server = str(server or env.get("TOPOQ_SERVER") or config.get("server") or DEFAULT_SERVER)
    if token:
        return ClientSettings(chosen_server, token, "--token")
    for source, value in (
        ("TOPOQ_TOKEN", env.get("TOPOQ_TOKEN")),
        ("config file token", config.get("token")),
    ):
        if value:
            return ClientSettings(chosen_server, str(value), source)
    for source, path in (
        ("TOPOQ_TOKEN_FILE", env.get("TOPOQ_TOKEN_FILE")),
        ("config file token_file", config.get("token_file")),
    ):
        if path:
            return ClientSettings(chosen_server, _read_token(Path(str(path))), source)
    if LOCAL_ADMIN_TOKEN.is_file():
        return ClientSettings(chosen_server, _read_token(LOCAL_ADMIN_TOKEN), str(LOCAL_ADMIN_TOKEN))
    return ClientSettings(chosen_server, None, "none")


def _config_file(env: Mapping[str, str]) -> dict[str, object]:
    path = Path(env.get("TOPOQ_CONFIG") or Path.home() / ".config" / "topoq" / "config.yaml")
    if not path.is_file():
        return {}
    try:
        loaded = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as error:
        raise InvalidInputError(f"cannot read the config file: {error}", where=str(path)) from None
    if not isinstance(loaded, dict):
        raise InvalidInputError("expected a mapping with server and token", where=str(path))
    return {str(key): value for key, value in loaded.items()}


def _read_token(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8").strip()
    except OSError as error:
        raise InvalidInputError(f"cannot read the token file: {error}", where=str(path)) from None
