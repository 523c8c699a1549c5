"""How the ``topoq`` command says what went wrong: one line on standard error, ``error: …``,
never a traceback, for what click rejects on the command line as for what a verb rejects.

Click's own report of a bad command line is four lines (the usage, a ``Try … --help`` line, a
blank one and ``Error: …``); ``one_line_usage_errors`` makes it one, with the verb's ``--help``
to see. The help a group prints when given no verb (``topoq policy``) is left as it is."""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import typer
import typer.core

_click: Any = getattr(typer.core, "_click", None) or importlib.import_module("click")
"""The click that typer's commands run on: its own copy since typer 0.2x, click before."""
_HELP_NOT_AN_ERROR: tuple[type[BaseException], ...] = tuple(
    kind for kind in (getattr(_click.exceptions, "NoArgsIsHelpError", None),) if kind is not None
)


@contextmanager
def one_line_usage_errors() -> Iterator[None]:
    """Click's usage errors (an unknown option, a missing argument, a value of the wrong
    type or not among the choices) as one line and their exit code, 2."""
    try:
        yield
    except _click.exceptions.UsageError as error:
        if isinstance(error, _HELP_NOT_AN_ERROR):
            raise
        typer.echo(f"error: {usage_line(error)}", err=True)
        raise typer.Exit(error.exit_code) from None


def usage_line(error: Any) -> str:
    """``invalid value for '--format': 'x' is not one of 'yaml', 'json' (see topoq policy
    convert --help)``."""
    from topoq.cli.common import one_line

    message = str(error.format_message()).replace("Value error, ", "").strip()
    message = message[:1].lower() + message[1:]
    command = error.ctx.command_path if error.ctx is not None else "topoq"
    return one_line(f"{message.rstrip('.')} (see {command} --help)")


def os_error_line(error: OSError) -> str:
    """A file a verb could not read or write: ``out.yaml: Is a directory``."""
    from topoq.cli.common import one_line

    reason = error.strerror or type(error).__name__
    if error.filename is None:
        return one_line(f"{reason}: {error}" if str(error) != reason else reason)
    return one_line(f"{error.filename}: {reason}")
