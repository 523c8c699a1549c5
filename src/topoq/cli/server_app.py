"""Typer definition of ``topoq server``: the control plane (store, scheduler loop, executor
and REST API). Its options are made from the fields of ``topoq.server.settings.ServerSettings``
(the same ones ``python -m topoq.bootstrap`` reads); the work is in :mod:`topoq.server`."""

from __future__ import annotations

import inspect
from typing import Annotated, Any

import typer

from topoq.cli.common import guarded
from topoq.server.settings import DEFAULTS, command_line_type, options


def server(**values: Any) -> None:
    """Run the control plane: store, scheduler loop, executor and REST API.

    The first start writes an admin token to DATA_DIR/admin-token. Without a token only
    /healthz, /metrics (per-team figures) and the API docs (/docs, /redoc,
    /openapi.json) answer (docs/api.md)."""
    from topoq.server.run import start
    from topoq.server.settings import settings_from

    guarded(lambda: start(settings_from(values)))


def _parameters() -> list[inspect.Parameter]:
    """One keyword parameter per settings field, annotated with its typer option."""
    found: list[inspect.Parameter] = []
    for name, option in options():
        kind, optional = command_line_type(name)
        flag = option.flag_of(name)
        declared = f"{flag}/--no-{flag[2:]}" if kind is bool else flag
        default = option.text_default or (None if option.parse else DEFAULTS[name])
        details: dict[str, Any] = {
            "help": option.help_text(),
            "show_default": default not in ("", None),
        }
        if option.choices:
            details["metavar"] = f"[{'|'.join(option.choices)}]"
        annotation = Annotated[kind | None if optional else kind, typer.Option(declared, **details)]  # type: ignore[valid-type]
        found.append(
            inspect.Parameter(
                name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=annotation
            )
        )
    return found


def register(app: typer.Typer) -> None:
    """Add ``server`` to the CLI."""
    parameters = _parameters()
    server.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    server.__annotations__ = {p.name: p.annotation for p in parameters}
    app.command()(server)
