"""Strict JSON and YAML parsers: what JSON can say, once per key, nothing that can explode.

Both refuse a key given twice in one mapping (naming the key and its line) instead of letting
the last one win, and a whole number of more than ``MAX_INTEGER_DIGITS`` digits before it is
converted. YAML aliases (``*name``) are refused: a few lines of anchors can stand for billions
of values (an "alias bomb") and every reader walks what the parser returns. YAML timestamps
stay strings, as JSON would have them. A parser that runs out of stack or memory on absurd
nesting is reported as nesting, the limit ``check_document`` enforces. PyYAML's C loader is
used when it is installed.
"""

from __future__ import annotations

import json
import json.decoder
import json.scanner
from collections.abc import Callable
from typing import Any, TypeVar

import yaml

from topoq.domain.errors import InvalidInputError
from topoq.domain.limits import MAX_DEPTH, MAX_INTEGER_DIGITS

_NESTED = f"nested more than {MAX_DEPTH} levels deep"
_NESTED_HINT = f"documents topoq reads are at most {MAX_DEPTH} mappings or lists deep"
_DIGITS = f"a number of more than {MAX_INTEGER_DIGITS} digits"
_DIGITS_HINT = "give a number a cluster can hold"

_T = TypeVar("_T")

_BaseLoader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _RefusedYaml(Exception):
    """Raised inside the YAML constructor; turned into an InvalidInputError with its line."""

    def __init__(self, message: str, mark: Any, hint: str) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark
        self.hint = hint


class _StrictLoader(_BaseLoader):  # type: ignore[misc]  # PyYAML ships no types for its loaders
    def construct_object(self, node: Any, deep: bool = False) -> Any:
        if node in self.constructed_objects or node in self.recursive_objects:
            raise _RefusedYaml(
                "this value has an anchor (&name) and is used again through an alias (*name)",
                node.start_mark,
                "write the value out: topoq does not expand anchors and aliases",
            )
        return super().construct_object(node, deep=deep)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: set[object] = set()
        for key_node, _ in node.value if isinstance(node, yaml.MappingNode) else ():
            if key_node.tag == "tag:yaml.org,2002:merge":
                raise _RefusedYaml(
                    "a YAML merge key (<<)", key_node.start_mark, "write the keys out"
                )
            key = key_node.value if isinstance(key_node, yaml.ScalarNode) else id(key_node)
            if (key_node.tag, key) in seen:
                raise _RefusedYaml(
                    f"the key {key!r:.80} is given twice in one mapping",
                    key_node.start_mark,
                    "keep one: topoq does not let the last one silently win",
                )
            seen.add((key_node.tag, key))
        return super().construct_mapping(node, deep=deep)

    def construct_bounded_int(self, node: Any) -> Any:
        digits = sum(character.isdigit() for character in str(node.value))
        if digits > MAX_INTEGER_DIGITS:
            raise _RefusedYaml(_DIGITS, node.start_mark, _DIGITS_HINT)
        return self.construct_yaml_int(node)


_StrictLoader.add_constructor("tag:yaml.org,2002:int", _StrictLoader.construct_bounded_int)
_StrictLoader.add_constructor("tag:yaml.org,2002:timestamp", _StrictLoader.construct_scalar)


def load_yaml(text: str, *, source: str, every: bool = False) -> Any:
    """One YAML document (or nothing), parsed strictly; errors name the file and line.
    ``every``: the list of all the documents of a multi-document stream (``---``)."""
    try:
        if every:  # a SafeLoader subclass: no arbitrary objects
            return [d for d in yaml.load_all(text, Loader=_StrictLoader) if d is not None]
        return yaml.load(text, Loader=_StrictLoader)
    except _RefusedYaml as refused:
        raise InvalidInputError(
            refused.message, where=_yaml_where(source, refused.mark), hint=refused.hint
        ) from None
    except yaml.YAMLError as error:
        problem = (getattr(error, "problem", None) or str(error)).splitlines()[0]
        where = _yaml_where(source, getattr(error, "problem_mark", None))
        raise InvalidInputError(f"invalid YAML: {problem}", where=where) from None
    except (RecursionError, MemoryError):
        raise InvalidInputError(_NESTED, where=source, hint=_NESTED_HINT) from None


def _yaml_where(source: str, mark: Any) -> str:
    return f"{source}:{mark.line + 1}:{mark.column + 1}" if mark is not None else source


class DuplicateKey(Exception):
    """Raised by ``unique_pairs``: a JSON object gives ``key`` twice (each reader words it)."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


class HugeInteger(Exception):
    """Raised by ``bounded_int``: a whole number of more than ``MAX_INTEGER_DIGITS`` digits."""

    def __init__(self, digits: int) -> None:
        super().__init__(digits)
        self.digits = digits


def unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json``'s ``object_pairs_hook`` that refuses a key given twice (``DuplicateKey``)."""
    mapping = dict(pairs)
    if len(mapping) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise DuplicateKey(key)
            seen.add(key)
    return mapping


def bounded_int(text: str) -> int:
    """``json``'s ``parse_int`` that refuses an over-long number before converting it."""
    digits = len(text.lstrip("-"))
    if digits > MAX_INTEGER_DIGITS:
        raise HugeInteger(digits)
    return int(text)


_DECODER = json.JSONDecoder(object_pairs_hook=unique_pairs, parse_int=bounded_int)


def load_json(text: str, *, source: str) -> Any:
    """One JSON document, parsed strictly; errors name the file and line."""
    return decode_json(lambda: _DECODER.decode(text), text, source=source)


def load_json_pages(text: str, *, source: str) -> list[Any]:
    """JSON documents one after another (``aws ... --output json`` pages), parsed strictly."""

    def pages() -> list[Any]:
        documents: list[Any] = []
        position = _skip_space(text, 0)
        while position < len(text):
            document, position = _DECODER.raw_decode(text, position)
            documents.append(document)
            position = _skip_space(text, position)
        return documents

    return decode_json(pages, text, source=source)


def decode_json(parse: Callable[[], _T], text: str, *, source: str) -> _T:
    """The result of ``parse`` (a strict decoding of ``text``), its failures as input errors."""
    try:
        return parse()
    except json.JSONDecodeError as error:
        where = f"{source}:{error.lineno}:{error.colno}"
        raise InvalidInputError(f"invalid JSON: {error.msg}", where=where) from None
    except DuplicateKey as duplicate:
        raise InvalidInputError(
            f"the key {duplicate.key!r:.80} is given twice in one mapping",
            where=_duplicate_where(text, duplicate.key, source),
            hint="keep one: topoq does not let the last one silently win",
        ) from None
    except HugeInteger:
        raise InvalidInputError(_DIGITS, where=source, hint=_DIGITS_HINT) from None
    except (RecursionError, MemoryError):
        raise InvalidInputError(_NESTED, where=source, hint=_NESTED_HINT) from None


def _skip_space(text: str, position: int) -> int:
    while position < len(text) and text[position] in " \t\n\r":
        position += 1
    return position


# The pure-Python parts of the json module (typeshed does not declare them).
_JSON_OBJECT: Callable[..., Any] = vars(json.decoder)["JSONObject"]
_SCANSTRING: Callable[[str, int], tuple[str, int]] = vars(json.decoder)["scanstring"]


class _FoundAt(Exception):
    def __init__(self, position: int) -> None:
        super().__init__(position)
        self.position = position


def _duplicate_where(text: str, key: str, source: str) -> str:
    """``source:line:column`` of the second ``key`` in the first mapping that repeats it.

    Only on the error path: a slow re-parse in Python that tracks positions."""
    decoder = json.JSONDecoder()

    def parse_object(s_and_end: tuple[str, int], strict: bool, scan_once: Any, *_: Any) -> Any:
        pairs, end = _JSON_OBJECT(s_and_end, strict, scan_once, None, list)
        keys = [name for name, _ in pairs]
        if len(set(keys)) != len(keys):
            raise _FoundAt(_second_key_position(*s_and_end, key, scan_once))
        return dict(pairs), end

    decoder.parse_object = parse_object  # type: ignore[attr-defined]  # the pure-Python hook
    decoder.scan_once = json.scanner.py_make_scanner(decoder)  # type: ignore[attr-defined]  # idem
    position = 0
    try:
        while position < len(text):
            _, position = decoder.raw_decode(text, _skip_space(text, position))
            position = _skip_space(text, position)
    except _FoundAt as found:
        line = text.count("\n", 0, found.position) + 1
        column = found.position - (text.rfind("\n", 0, found.position) + 1) + 1
        return f"{source}:{line}:{column}"
    except (ValueError, RecursionError, MemoryError):
        pass
    return source


def _second_key_position(text: str, end: int, key: str, scan_once: Any) -> int:
    """Where ``key`` appears the second time among the keys of the object opened at ``end``."""
    seen = False
    position = _skip_space(text, end)
    while text[position] == '"':
        name, after = _SCANSTRING(text, position + 1)
        if name == key:
            if seen:
                return position
            seen = True
        position = _skip_space(text, _skip_space(text, after) + 1)  # past the ':'
        _, position = scan_once(text, position)
        position = _skip_space(text, _skip_space(text, position) + 1)  # past the ',' or '}'
    return end
