"""The block plugin: ``BlockName=`` and ``BlockSizes=`` lines built into blocks and checked.

Checks follow what Slurm refuses at start-up: block names unique, every block lists Nodes=, a
node is in one block, BlockSizes ascending with each entry the base size times a power of two
(at most 2**15), and no block smaller than the base block size. Blocks larger than the base are
allowed, as in Slurm (a block of 18 with ``BlockSizes=16,32`` plans with 16 of its nodes).
"""

from __future__ import annotations

from itertools import pairwise

from topoq.discovery.slurm_lines import (
    ConfLine,
    NodeCount,
    at,
    check_nodes_listed_once,
    check_single_name,
    check_unique_names,
)
from topoq.discovery.slurm_model import MAX_BLOCK_LEVEL, SlurmBlock
from topoq.domain.errors import TopologyError

_SIZES_HINT = "write BlockSizes=<base>,<base×2>,<base×4>… in nodes, e.g. BlockSizes=18,36,72"


def build_blocks(
    lines: list[ConfLine], source: str
) -> tuple[tuple[SlurmBlock, ...], tuple[int, ...]]:
    """The blocks in file order and BlockSizes as written (empty when absent)."""
    size_lines = [line for line in lines if line.kind == "BlockSizes"]
    if len(size_lines) > 1:
        raise TopologyError(
            f"BlockSizes= is given on line {size_lines[0].number} and again on line "
            f"{size_lines[1].number}",
            where=at(source, size_lines[1].number),
            hint="keep one BlockSizes= line",
        )
    listed = NodeCount(source)
    blocks = tuple(
        _block_from_line(line, source, listed) for line in lines if line.kind == "BlockName"
    )
    if not blocks:
        raise TopologyError(
            "the topology is empty: BlockSizes= but no BlockName= line",
            where=at(source, size_lines[0].number),
            hint="add the blocks, e.g. 'BlockName=nvl1 Nodes=gb-[01-18]'",
        )
    sizes = _block_sizes(size_lines[0], source) if size_lines else ()
    check_unique_names(blocks, kind="block", key="BlockName", source=source)
    check_nodes_listed_once(blocks, kind="block", source=source)
    _check_base_size(blocks, sizes, size_lines[0].number if size_lines else None, source)
    return blocks, sizes


def _block_from_line(line: ConfLine, source: str, listed: NodeCount) -> SlurmBlock:
    check_single_name(line, source)
    if "Nodes" not in line.values:
        raise TopologyError(
            f"block {line.name} lists no Nodes=",
            where=at(source, line.number),
            hint="add Nodes=<hostlist> to the line, or remove the line",
        )
    nodes = listed.expand(line, "Nodes")
    return SlurmBlock(name=line.name, nodes=nodes, line=line.number)


def _block_sizes(line: ConfLine, source: str) -> tuple[int, ...]:
    where = at(source, line.number)
    sizes: list[int] = []
    for piece in line.name.split(","):
        if not piece.isdecimal() or int(piece) == 0:
            raise TopologyError(
                f"BlockSizes={line.name} has {piece!r}, not a positive whole number",
                where=where,
                hint=_SIZES_HINT,
            )
        sizes.append(int(piece))
    base = sizes[0]
    for previous, size in pairwise(sizes):
        if size <= previous:
            raise TopologyError(
                f"BlockSizes={line.name} is not ascending: {size} follows {previous}",
                where=where,
                hint=_SIZES_HINT,
            )
        if size % base:
            raise TopologyError(
                f"BlockSizes={line.name}: {size} is not a multiple of the base block size {base}",
                where=where,
                hint=_SIZES_HINT,
            )
        span = size // base
        if span & (span - 1) or span.bit_length() - 1 > MAX_BLOCK_LEVEL:
            raise TopologyError(
                f"BlockSizes={line.name}: {size} is {span} base blocks, "
                f"not a power of two up to {2**MAX_BLOCK_LEVEL}",
                where=where,
                hint="Slurm groups 2, 4, 8, … base blocks; " + _SIZES_HINT,
            )
    return tuple(sizes)


def _check_base_size(
    blocks: tuple[SlurmBlock, ...], sizes: tuple[int, ...], sizes_line: int | None, source: str
) -> None:
    smallest = min(len(block.nodes) for block in blocks)
    if sizes_line is not None:
        base, origin = sizes[0], f"BlockSizes= on line {sizes_line}"
        fix = f"lower the first BlockSizes= entry to {smallest}"
    else:
        base, origin = len(blocks[0].nodes), f"the first block, {blocks[0].name} (no BlockSizes=)"
        fix = f"add BlockSizes={smallest} (the smallest block) or list the smallest block first"
    for block in blocks:
        if len(block.nodes) < base:
            raise TopologyError(
                f"block {block.name} holds {len(block.nodes)} nodes, fewer than the base block "
                f"size {base} set by {origin}",
                where=at(source, block.line),
                hint=f"every block needs at least the base block size; {fix}, "
                "or add nodes to the block",
            )
