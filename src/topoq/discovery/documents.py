"""Reading JSON/YAML documents with errors that name the file, the line and the field."""

from __future__ import annotations

import difflib
import json
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from topoq.domain.errors import InvalidInputError


def read_text_file(path: Path | str) -> str:
    """The file's text; a missing or unreadable file is an error that names it."""
    try:
        return Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        raise InvalidInputError("file not found", where=str(path), hint="check the path") from None
    except (OSError, UnicodeDecodeError) as error:
        raise InvalidInputError(f"cannot read the file: {error}", where=str(path)) from None


def read_document(path: Path | str) -> Any:
    """Parse a JSON or YAML file (YAML is a superset of JSON). Errors name the file and line."""
    return parse_document(read_text_file(path), source=str(path))


def parse_document(text: str, *, source: str) -> Any:
    if not text.strip():
        raise InvalidInputError(
            "the file is empty", where=source, hint="give a JSON or YAML document"
        )
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            return json.loads(text)
        except json.JSONDecodeError as error:
            raise InvalidInputError(
                f"invalid JSON: {error.msg}", where=f"{source}:{error.lineno}:{error.colno}"
            ) from None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source
        problem = getattr(error, "problem", None) or str(error)
        raise InvalidInputError(f"invalid YAML: {problem}", where=where) from None


class Fields:
    """Typed access to a mapping from a document; every error names the path to the field.

    ``Fields({"count": "x"}, "job.yaml: spec").integer("count")`` raises
    ``InvalidInputError("job.yaml: spec.count: expected an integer, got 'x'")``.
    """

    def __init__(self, value: object, where: str) -> None:
        if not isinstance(value, Mapping):
            raise InvalidInputError(f"expected a mapping, got {_kind(value)}", where=where)
        self.data: Mapping[str, Any] = value
        self.where = where

    def path(self, key: str) -> str:
        return f"{self.where}.{key}" if self.where else key

    def reject_unknown_keys(self, accepted: Iterable[str], *, listed: Sequence[str]) -> None:
        """Fail on a key not in ``accepted``, suggesting the closest and listing ``listed``."""
        known = sorted(set(accepted))
        for key in self.data:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                guess = f"did you mean {close[0]!r}? " if close else ""
                raise InvalidInputError(
                    f"unknown key {key!r}",
                    where=self.path(str(key)),
                    hint=f"{guess}allowed keys: {', '.join(listed)}",
                )

    def has(self, key: str) -> bool:
        return self.data.get(key) is not None

    def raw(self, key: str, default: Any = None) -> Any:
        value = self.data.get(key)
        return default if value is None else value

    def required(self, key: str) -> Any:
        value = self.data.get(key)
        if value is None:
            raise InvalidInputError(
                "is missing", where=self.path(key), hint=f"add the field {key!r}"
            )
        return value

    def text(self, key: str, default: str | None = None) -> str:
        value = self.data.get(key)
        if value is None:
            if default is None:
                return str(self.required(key))
            return default
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise InvalidInputError(f"expected a string, got {_kind(value)}", where=self.path(key))
        return str(value)

    def optional_text(self, key: str) -> str | None:
        return self.text(key) if self.has(key) else None

    def integer(self, key: str, default: int | None = None) -> int:
        value = self.data.get(key)
        if value is None:
            if default is None:
                self.required(key)
            return int(default or 0)
        if isinstance(value, bool) or not isinstance(value, int | str):
            raise InvalidInputError(f"expected an integer, got {value!r}", where=self.path(key))
        try:
            return int(value)
        except ValueError:
            raise InvalidInputError(
                f"expected an integer, got {value!r}", where=self.path(key)
            ) from None

    def boolean(self, key: str, default: bool = False) -> bool:
        value = self.data.get(key)
        if value is None:
            return default
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise InvalidInputError(f"expected true or false, got {value!r}", where=self.path(key))

    def mapping(self, key: str) -> Fields:
        """A nested mapping (empty when absent)."""
        return Fields(self.data.get(key) or {}, self.path(key))

    def string_map(self, key: str) -> dict[str, str]:
        nested = self.mapping(key)
        return {str(name): nested.text(str(name)) for name in nested.data}

    def items(self, key: str) -> list[Any]:
        """A list (empty when absent)."""
        value = self.data.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise InvalidInputError(f"expected a list, got {_kind(value)}", where=self.path(key))
        return value

    def records(self, key: str) -> list[Fields]:
        return [
            Fields(item, f"{self.path(key)}[{index}]") for index, item in enumerate(self.items(key))
        ]


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r}"


def argv(fields: Fields, key: str) -> tuple[str, ...]:
    """A command as an argv: a list of strings, or one string split as a shell would."""
    value = fields.raw(key)
    if value is None:
        return ()
    if isinstance(value, str):
        try:
            return tuple(shlex.split(value))
        except ValueError as error:
            raise InvalidInputError(
                f"cannot split the command: {error}", where=fields.path(key)
            ) from None
    if isinstance(value, list) and all(isinstance(part, str | int | float) for part in value):
        return tuple(str(part) for part in value)
    raise InvalidInputError(
        f"expected a list of strings, got {_kind(value)}",
        where=fields.path(key),
        hint='e.g. ["python", "train.py"]',
    )


def check_header(fields: Fields, api_version: str, kind: str, *, what: str) -> None:
    """``apiVersion`` and ``kind`` are the expected ones (absent means expected); the error
    says what ``what`` (``a scenario``, ``a topoq cluster file``) carries."""
    for key, expected in (("apiVersion", api_version), ("kind", kind)):
        value = fields.text(key, expected)
        if value != expected:
            raise InvalidInputError(
                f"expected {expected!r}, got {value!r}",
                where=fields.path(key),
                hint=f"{what} has apiVersion {api_version} and kind {kind}",
            )
