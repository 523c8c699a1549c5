"""Reading JSON/YAML documents with errors that name the file, the line and the field."""

from __future__ import annotations

import difflib
import shlex
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from topoq.discovery.document_parsers import load_json, load_json_pages, load_yaml
from topoq.domain.errors import InvalidInputError
from topoq.domain.limits import MAX_DOCUMENT_BYTES, MAX_INTEGER_DIGITS, check_document


def read_text_file(path: Path | str, *, max_bytes: int = MAX_DOCUMENT_BYTES) -> str:
    """The file's text (UTF-8); a missing, unreadable, binary or too large file is an error
    that names it. The size is checked before the file is read whole."""
    try:
        with Path(path).open("rb") as file:
            data = file.read(max_bytes + 1)
    except FileNotFoundError:
        raise InvalidInputError("file not found", where=str(path), hint="check the path") from None
    except OSError as error:
        raise InvalidInputError(
            f"cannot read the file: {error.strerror}", where=str(path)
        ) from None
    if len(data) > max_bytes:
        raise InvalidInputError(
            f"the file is larger than {max_bytes // 2**20} MiB",
            where=str(path),
            hint=f"files topoq reads are at most {max_bytes // 2**20} MiB",
        )
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise InvalidInputError(
            f"not UTF-8 text (byte {error.start} is {data[error.start : error.start + 1]!r})",
            where=str(path),
            hint="give a UTF-8 text file",
        ) from None


def read_document(path: Path | str) -> Any:
    """Parse a JSON or YAML file (YAML is a superset of JSON). Errors name the file and line."""
    return parse_document(read_text_file(path), source=str(path))


def parse_document(text: str, *, source: str) -> Any:
    """The one way topoq reads a JSON or YAML document: a size cap before parsing, a strict
    parser (no duplicate keys, no aliases, bounded integers), then ``check_document`` (depth,
    entries, string lengths, finite numbers, only what JSON can hold).

    YAML of several documents (``---``) that are all Kubernetes objects (each a mapping with
    ``apiVersion`` and ``kind``) is read as kubectl reads it: one ``v1 List`` of them, in
    order — the Pods of a group, a Kueue Topology with its ResourceFlavors, Nodes. Several
    documents of any other kind are refused (a file of topoq's own formats is one document)."""
    _check_size(text, source)
    if not text.strip():
        raise InvalidInputError(
            "the file is empty", where=source, hint="give a JSON or YAML document"
        )
    if text.lstrip().startswith(("{", "[")):
        document = load_json(text, source=source)
    else:
        documents = load_yaml(text, source=source, every=True)
        document = documents[0] if len(documents) == 1 else _object_list(documents, source)
    checked(document, source=source)
    return document


LIST_API_VERSION, LIST_KIND = "v1", "List"


def _object_list(documents: list[Any], source: str) -> Any:
    """Several YAML documents as one ``v1 List``; none (only comments or ``null``) as None."""
    if not documents:
        return None
    for index, document in enumerate(documents):
        if not (isinstance(document, Mapping) and "apiVersion" in document and "kind" in document):
            raise InvalidInputError(
                f"document {index + 1} of {len(documents)} is not a Kubernetes object "
                "(a mapping with apiVersion and kind)",
                where=source,
                hint="give one document, or only Kubernetes objects separated by ---",
            )
    return {"apiVersion": LIST_API_VERSION, "kind": LIST_KIND, "items": documents}


def parse_json_text(text: str, *, source: str) -> Any:
    """A JSON document held in a string (e.g. an annotation's value), read as files are."""
    _check_size(text, source)
    return checked(load_json(text, source=source), source=source)


def documents_in_text(text: str, *, source: str) -> list[Any]:
    """The documents in ``text``: one JSON/YAML document, YAML documents separated by
    ``---``, or JSON pages one after another."""
    if not text.lstrip().startswith("{"):
        if text.lstrip().startswith("["):
            return [parse_document(text, source=source)]
        _check_size(text, source)
        documents = load_yaml(text, source=source, every=True)
        if not documents:
            raise InvalidInputError(
                "the file is empty", where=source, hint="give a JSON or YAML document"
            )
        return [checked(document, source=source) for document in documents]
    _check_size(text, source)
    documents = load_json_pages(text, source=source)
    return [checked(document, source=source) for document in documents]


def checked(document: Any, *, source: str) -> Any:
    """``document`` if it is within the limits every document has (``check_document``);
    an error names ``source`` and the field path (``nodes.json: items[3].name``)."""
    try:
        check_document(document, where="")
    except InvalidInputError as error:
        raise error.located(source) from None
    return document


def _check_size(text: str, source: str) -> None:
    if len(text) > MAX_DOCUMENT_BYTES or len(text.encode()) > MAX_DOCUMENT_BYTES:
        raise InvalidInputError(
            f"the document is larger than {MAX_DOCUMENT_BYTES // 2**20} MiB",
            where=source,
            hint=f"documents topoq reads are at most {MAX_DOCUMENT_BYTES // 2**20} MiB",
        )


class Fields:
    """Typed access to a mapping from a document; every error names the path to the field.

    ``Fields({"count": "x"}, "job.yaml: spec").integer("count")`` raises
    ``InvalidInputError("job.yaml: spec.count: expected a whole number, got str 'x'")``.
    """

    def __init__(self, value: object, where: str) -> None:
        if not isinstance(value, Mapping):
            raise InvalidInputError(f"expected a mapping, got {_kind(value)}", where=where)
        self.data: Mapping[str, Any] = value
        self.where = where

    def path(self, key: str) -> str:
        shown = key if isinstance(key, str) and key.isprintable() else repr(key)
        return f"{self.where}.{shown}" if self.where else shown

    def reject_unknown_keys(self, accepted: Iterable[str], *, listed: Sequence[str]) -> None:
        """Fail on a key not in ``accepted``, suggesting the closest and listing ``listed``."""
        known = sorted(set(accepted))
        for key in self.data:
            if key not in known:
                raise unknown_key(str(key), known, where=self.path(str(key)), listed=listed)

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
        """A string; a number, boolean, list or mapping is refused, never converted."""
        value = self.data.get(key)
        if value is None:
            if default is None:
                value = self.required(key)
            else:
                return default
        if not isinstance(value, str):
            raise InvalidInputError(
                f"expected a string, got {_kind(value)}",
                where=self.path(key),
                hint="quote the value" if isinstance(value, int | float) else None,
            )
        return value

    def optional_text(self, key: str) -> str | None:
        return self.text(key) if self.has(key) else None

    def integer(self, key: str, default: int | None = None) -> int:
        """A whole number (or a string of one, as Kubernetes annotations hold them), within
        the range of a 64-bit integer; ``1.5``, ``1e30`` and ``true`` are refused."""
        value = self.data.get(key)
        if value is None:
            if default is None:
                self.required(key)
            return int(default or 0)
        number = _whole_number(value)
        if number is None or not -WHOLE_NUMBER_MAX <= number <= WHOLE_NUMBER_MAX:
            raise InvalidInputError(
                f"expected a whole number, got {_kind(value)}",
                where=self.path(key),
                hint=f"give a whole number from {-WHOLE_NUMBER_MAX:,} to {WHOLE_NUMBER_MAX:,}",
            )
        return number

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


def unknown_key(
    key: str,
    known: Sequence[str],
    *,
    where: str,
    listed: Sequence[str],
    what: str = "key",
    cutoff: float = 0.6,
) -> InvalidInputError:
    """The one way every reader of topoq's own formats refuses a key it does not know:
    ``unknown key 'podSet'`` with the hint ``did you mean 'podSets'? allowed keys: …``
    (the closest of ``known`` by ``difflib.get_close_matches``, then ``listed``)."""
    close = difflib.get_close_matches(key, list(known), n=1, cutoff=cutoff)
    guess = f"did you mean {close[0]!r}? " if close else ""
    return InvalidInputError(
        f"unknown {what} {key!r}",
        where=where,
        hint=f"{guess}allowed {what}s: {', '.join(listed)}",
    )


WHOLE_NUMBER_MAX = 2**63 - 1
"""The largest whole number a field holds (a 64-bit integer, as Kubernetes' int64)."""


def _whole_number(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    text = value.strip() if isinstance(value, str) else ""
    if text.lstrip("+-").isdecimal() and text.isascii() and len(text) <= MAX_INTEGER_DIGITS + 1:
        return int(text)
    return None


def _kind(value: object) -> str:
    if value is None:
        return "nothing"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {value!r:.60}"


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
    if isinstance(value, list) and all(isinstance(part, str) for part in value):
        return tuple(value)
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
