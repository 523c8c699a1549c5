"""What the CLI's verbs share to print: ``-o/--output table|json|yaml`` and how a wire model,
a list of them or a plain document comes out in each; plain tables, UTC times, counted nouns
and byte amounts as Kubernetes quantities."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import typer

from topoq.domain.errors import TopoqError
from topoq.domain.quantity import EPHEMERAL_STORAGE, MEMORY, byte_quantity, quantity_value


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


OutputOption = Annotated[
    Output, typer.Option("--output", "-o", help="table, json or yaml.", show_default=True)
]
JsonAliasOption = Annotated[
    bool, typer.Option("--json", hidden=True, help="Deprecated: the same as -o json.")
]
"""The ``--json`` flag the server verbs took before ``-o``; kept, hidden, for old scripts."""


def chosen_output(output: Output, as_json: bool) -> Output:
    """``-o``'s choice, or JSON when the deprecated ``--json`` was given."""
    return Output.JSON if as_json else output


def document_of(found: Any) -> Any:
    """``found`` as plain data: a wire model by its camelCase aliases, a list item by item,
    anything else (a dict of the offline verbs) as it is."""
    if isinstance(found, list):
        return [document_of(item) for item in found]
    dump = getattr(found, "model_dump", None)
    return dump(mode="json") if callable(dump) else found


def print_document(output: Output, document: Any) -> None:
    """Plain data as JSON (indented) or YAML (in the order given)."""
    if output is Output.JSON:
        import json

        print(json.dumps(document, indent=2))
    else:
        import yaml

        print(yaml.safe_dump(document, sort_keys=False), end="")


def print_as(output: Output, found: Any, table: Callable[[], str] | None) -> None:
    """``found`` (a wire model, a list of them, or a plain document) as JSON or YAML, else
    ``table()``."""
    if output is Output.TABLE:
        if table is not None:
            print(table())
        return
    print_document(output, document_of(found))


def utc(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def table_of(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    """Columns aligned with spaces under a rule; a cell may hold several lines. Linear in the
    cells, for tables as long as a policy's teams (Rich measures and wraps every cell, about a
    millisecond a row)."""
    split = [[cell.split("\n") for cell in row] for row in rows]
    widths = [len(header) for header in headers]
    for row in split:
        for column, lines in enumerate(row):
            widths[column] = max(widths[column], *(len(line) for line in lines))
    out = [_aligned(headers, widths), _aligned(["-" * width for width in widths], widths)]
    for row in split:
        for index in range(max(len(lines) for lines in row)):
            out.append(
                _aligned([lines[index] if index < len(lines) else "" for lines in row], widths)
            )
    return "\n".join(out)


def _aligned(cells: Sequence[str], widths: Sequence[int]) -> str:
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths, strict=True)).rstrip()


def counted(count: int, noun: str, plural: str | None = None) -> str:
    """``1 job``, ``2 jobs``, ``0 jobs`` (``plural`` when adding an s is wrong)."""
    return f"{count} {noun if count == 1 else plural or noun + 's'}"


BYTE_RESOURCES = frozenset({MEMORY, EPHEMERAL_STORAGE})


def readable_quantity(resource: str, quantity: str) -> str:
    """A resource amount as the API gives it (``1536Gi``), shown for people: bytes of memory
    and storage in the largest unit (``1.5Ti``); other resources as they are."""
    if resource not in BYTE_RESOURCES:
        return quantity
    try:
        return byte_quantity(int(quantity_value(quantity)))
    except (TopoqError, ValueError):
        return quantity
