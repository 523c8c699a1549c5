"""Where the server is and which token to use: options, then environment, then the config file.

Order: ``--server``/``--token`` options; ``TOPOQ_SERVER``, ``TOPOQ_TOKEN`` (or
``TOPOQ_TOKEN_FILE``); the file named by ``TOPOQ_CONFIG`` or ``~/.config/topoq/config.yaml``
(``server:``, ``token:`` or ``token_file:``); finally ``http://127.0.0.1:8750`` and the admin
token a local server writes to ``.topoq/admin-token``.

Every setting is checked here, so that a bad one is one ``InvalidInputError`` that names where
it came from and what to write instead: a server URL without ``http://`` or with a bad port, a
token file that is missing, a directory or empty (a relative one is read from the current
directory, or from the config file's directory for ``token_file:``), a config file that is not
YAML, holds a key it does not know or a value of the wrong type."""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from topoq.domain.errors import InvalidInputError

DEFAULT_SERVER = "http://127.0.0.1:8750"
LOCAL_ADMIN_TOKEN = Path(".topoq") / "admin-token"
CONFIG_KEYS = ("server", "token", "token_file")
SERVER_FORM = "give http://HOST:PORT or https://HOST:PORT, e.g. http://127.0.0.1:8750"


@dataclass(frozen=True)
class ClientSettings:
    server: str
    token: str | None
    token_source: str


@dataclass(frozen=True)
class _ConfigFile:
    path: Path
    values: Mapping[str, str]


def resolve_settings(
    server: str | None = None,
    token: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> ClientSettings:
    env = os.environ if environ is None else environ
    config = _config_file(env)
    chosen_server, server_source = DEFAULT_SERVER, "the default server"
    for source, value in (
        ("--server", server),
        ("TOPOQ_SERVER", env.get("TOPOQ_SERVER")),
        (f"{config.path}: server", config.values.get("server")),
    ):
        if value:
            chosen_server, server_source = value, source
            break
    chosen_server = server_url(chosen_server, where=server_source)
    for source, value in (
        ("--token", token),
        ("TOPOQ_TOKEN", env.get("TOPOQ_TOKEN")),
        (f"{config.path}: token", config.values.get("token")),
    ):
        if value:
            return ClientSettings(chosen_server, checked_token(value, where=source), source)
    for source, path in (
        ("TOPOQ_TOKEN_FILE", _path(env.get("TOPOQ_TOKEN_FILE"), Path.cwd())),
        (
            f"{config.path}: token_file",
            _path(config.values.get("token_file"), config.path.parent),
        ),
    ):
        if path is not None:
            return ClientSettings(chosen_server, read_token(path, where=source), source)
    if LOCAL_ADMIN_TOKEN.is_file():
        local = LOCAL_ADMIN_TOKEN.resolve()
        return ClientSettings(chosen_server, read_token(local, where=str(local)), str(local))
    return ClientSettings(chosen_server, None, "none")


def server_url(url: str, *, where: str) -> str:
    """``url`` without a trailing ``/`` when it is an http(s) URL with a host and a valid port;
    else an ``InvalidInputError`` naming ``where`` it came from."""
    text = url.strip()
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as error:
        raise InvalidInputError(
            f"{text!r} is not a server URL ({error})", where=where, hint=SERVER_FORM
        ) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise InvalidInputError(
            f"{text!r} is not an http(s) URL with a host", where=where, hint=SERVER_FORM
        )
    if port == 0:
        raise InvalidInputError(f"port 0 in {text!r}", where=where, hint=SERVER_FORM)
    return text.rstrip("/")


def read_token(path: Path, *, where: str) -> str:
    """The token in ``path`` (its first line's text, spaces trimmed)."""
    if path.is_dir():
        raise InvalidInputError(
            f"{path} is a directory, not a token file", where=where, hint=_TOKEN_HINT
        )
    try:
        token = path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise InvalidInputError(
            f"cannot read the token file {path}: {reason}", where=where, hint=_TOKEN_HINT
        ) from None
    if not token:
        raise InvalidInputError(f"the token file {path} is empty", where=where, hint=_TOKEN_HINT)
    return checked_token(token, where=f"{where} ({path})")


def checked_token(token: str, *, where: str) -> str:
    """``token`` when it can be sent in an HTTP header: printable ASCII, no spaces."""
    if token.isascii() and token.isprintable() and not any(c.isspace() for c in token):
        return token
    raise InvalidInputError(
        "a token is printable ASCII without spaces: this one is not",
        where=where,
        hint="copy it again from topoq token create, or from the admin token file",
    )


_TOKEN_HINT = (
    "name a file that holds a token: a local server writes its admin token to "
    ".topoq/admin-token, topoq token create prints new ones"
)


def _path(value: str | None, base: Path) -> Path | None:
    """``value`` as a path: ``~`` expanded, a relative one taken from ``base``."""
    if not value:
        return None
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _config_file(env: Mapping[str, str]) -> _ConfigFile:
    named = env.get("TOPOQ_CONFIG")
    path = _path(named, Path.cwd()) or Path.home() / ".config" / "topoq" / "config.yaml"
    where = f"TOPOQ_CONFIG={named}" if named else str(path)
    if not named and not path.exists():
        return _ConfigFile(path, {})
    if path.is_dir():
        raise InvalidInputError(f"{path} is a directory, not a config file", where=where)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = error.strerror if isinstance(error, OSError) else "not UTF-8 text"
        raise InvalidInputError(
            f"cannot read the config file {path}: {reason}",
            where=where,
            hint="point TOPOQ_CONFIG at a readable YAML file, or unset it",
        ) from None
    return _ConfigFile(path, config_values(text, str(path)))


def config_values(text: str, where: str) -> dict[str, str]:
    """The settings of a config file's ``text``: a YAML mapping of ``server``, ``token`` and
    ``token_file``, each a string."""
    if not text.strip():
        return {}
    import yaml  # only when there is a config file: most commands read none

    try:
        loaded = yaml.safe_load(text)
    except yaml.YAMLError as error:
        raise InvalidInputError(f"not valid YAML: {_yaml_problem(error)}", where=where) from None
    if loaded is None:
        return {}
    if not isinstance(loaded, dict):
        raise InvalidInputError(
            f"expected a mapping of {', '.join(CONFIG_KEYS)}, found a {type(loaded).__name__}",
            where=where,
            hint="e.g. server: http://127.0.0.1:8750",
        )
    values: dict[str, str] = {}
    for key, value in loaded.items():
        if key not in CONFIG_KEYS:
            near = difflib.get_close_matches(str(key), CONFIG_KEYS, n=1)
            raise InvalidInputError(
                f"unknown key {str(key)!r}" + (f" (did you mean {near[0]!r}?)" if near else ""),
                where=where,
                hint=f"the keys are {', '.join(CONFIG_KEYS)}",
            )
        if value is None:
            continue
        if not isinstance(value, str):
            raise InvalidInputError(
                f"must be a string, not {value!r}",
                where=f"{where}: {key}",
                hint="quote it if YAML reads it as something else",
            )
        values[key] = value
    return values


def _yaml_problem(error: Exception) -> str:
    """One line out of PyYAML's several: the problem and where it is."""
    problem = getattr(error, "problem", None) or str(error).splitlines()[0]
    mark = getattr(error, "problem_mark", None)
    if mark is None:
        return str(problem)
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}"
