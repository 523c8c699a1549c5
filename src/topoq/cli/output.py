"""What the CLI's verbs share to print: ``-o/--output table|json|yaml`` and how a wire model (or
a list of them) comes out in each, plain tables and UTC times."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from enum import StrEnum
from typing import Annotated, Any

import typer


class Output(StrEnum):
    TABLE = "table"
    JSON = "json"
    YAML = "yaml"


OutputOption = Annotated[
    Output, typer.Option("--output", "-o", help="table, json or yaml.", show_default=True)
]


def print_as(output: Output, found: Any, table: Callable[[], str] | None) -> None:
    """``found`` (a wire model or a list of them) as JSON or YAML, else ``table()``."""
    if output is Output.TABLE:
        if table is not None:
            print(table())
        return
    document = (
        [item.model_dump(mode="json") for item in found]
        if isinstance(found, list)
        else found.model_dump(mode="json")
    )
    if output is Output.JSON:
        import json

        print(json.dumps(document, indent=2))
    else:
        import yaml

        print(yaml.safe_dump(document, sort_keys=False), end="")


def utc(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    return datetime.fromtimestamp(seconds, tz=UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def table_of(columns: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    from topoq.cli.render import text_table

    return text_table(columns, rows)
