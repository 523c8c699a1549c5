"""The CLI's Rich console, for the verbs that draw trees and styled tables (plain tables are
``output.table_of``, which needs no Rich): cheap to import, no numpy and no core."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

PIPE_WIDTH = 120
"""Columns used when output goes to a file or a pipe, where Rich would assume 80."""


def emit(text: str, out: Path | None) -> None:
    """``text`` to the file ``out``, or to standard output when there is none."""
    if out is None:
        print(text, end="")
    else:
        out.write_text(text, encoding="utf-8")


class CliConsole(Console):
    """A Rich console whose closed pipe (``topoq … | head``) is the CLI's to handle, in one
    place (``topoq.cli.app``: exit 0), instead of Rich's exit 1."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        raise BrokenPipeError


def make_console(*, stderr: bool = False) -> Console:
    console = CliConsole(highlight=False, emoji=False, stderr=stderr, soft_wrap=stderr)
    if not console.is_terminal:
        console.width = PIPE_WIDTH
    return console
