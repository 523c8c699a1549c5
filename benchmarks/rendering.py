"""A benchmark's table of text cells, for the terminal or as Markdown (for docs)."""

from __future__ import annotations

from collections.abc import Collection, Sequence

from rich import box
from rich.console import Console
from rich.table import Table


def cells_table(
    title: str,
    header: Sequence[str],
    cells: Sequence[Sequence[str]],
    *,
    left: Collection[str] = (),
    markdown: bool = False,
) -> str:
    """``cells`` under ``header``: a Markdown table, or a terminal one titled ``title`` whose
    ``left`` columns are left-aligned and the rest right-aligned."""
    if markdown:
        lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
        lines += ["| " + " | ".join(cell) + " |" for cell in cells]
        return "\n".join(lines)
    shown = Table(box=box.SIMPLE, title=title)
    for name in header:
        shown.add_column(name, justify="left" if name in left else "right")
    for cell in cells:
        shown.add_row(*cell)
    console = Console(width=200, record=True)
    with console.capture() as captured:
        console.print(shown)
    return captured.get()
