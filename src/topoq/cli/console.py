"""The CLI's console and plain tables: what every verb prints with, cheap to import (no numpy,
no core): ``topoq list`` and ``topoq --help`` must not pay for placement's imports."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
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


def text_table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
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
