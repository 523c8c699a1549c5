"""The node inventory and the policy versions in tables.

A node's health and cordon state live in their own columns (``ready``, ``unschedulable``),
which are what a node action changes: ``update_node_state`` is one single-row UPDATE of the
fields asked for, so concurrent actions on different nodes, or on different fields of one
node, never undo each other. The ``spec`` document holds the rest (labels, taints,
allocatable); reading a node takes its state from the columns. ``KnownNodes`` decodes only the
rows that changed since the last read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Final

from sqlalchemy import Text, cast, delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.node import NodeSpec
from topoq.store import write_seq
from topoq.store.codec import decode_node, encode_node
from topoq.store.errors import ConcurrentUpdate
from topoq.store.policy_codec import decode_policy, encode_policy
from topoq.store.schema import NodeRow, PolicyVersionRow
from topoq.store.write_seq import take_turn

NODE_COLUMNS = (NodeRow.spec, NodeRow.ready, NodeRow.unschedulable)


NODE_ROWS: Final = select(
    cast(NodeRow.spec, Text).label("document"), NodeRow.ready, NodeRow.unschedulable
).order_by(NodeRow.position, NodeRow.name)
"""The inventory in order, each spec as the text stored (decoded only when it changed)."""


INVENTORY_WRITTEN: Final = select(func.count(), func.max(NodeRow.write_seq))
"""How many nodes there are and the latest write of one: a write changes the pair."""
NODE_WRITES_LOCK_KEY = 0x7070_7132
TAKE_TURN_TO_WRITE_NODES: Final = take_turn(NODE_WRITES_LOCK_KEY)


def next_write_seq(connection: Connection) -> int:
    """The ``write_seq`` of the node rows this transaction writes (``store/write_seq.py``)."""
    return write_seq.next_write_seq(connection, NodeRow.write_seq, NODE_WRITES_LOCK_KEY)


class KnownNodes:
    """The nodes as last read, by their stored row (the spec's text, ``ready``,
    ``unschedulable``): the controller reads the inventory every step, and decoding 4,096
    specs cost it ~50 ms. A row read as it was hands out the very same ``NodeSpec``, so that
    the topology tree cache recognises an unchanged inventory by identity. Nothing can be
    stale: a read whose count of nodes and latest write (``INVENTORY_WRITTEN``, read first)
    are those of the last read hands out the same nodes; any other compares every row's stored
    text and state."""

    def __init__(self) -> None:
        self._by_row: dict[tuple[str, bool, bool], NodeSpec] = {}
        self._last: tuple[tuple[int, int | None], list[NodeSpec]] | None = None
        """The last read's count and latest write, and its nodes."""

    def read(self, connection: Connection) -> list[NodeSpec]:
        count, latest = connection.execute(INVENTORY_WRITTEN).one()
        written = (int(count), None if latest is None else int(latest))
        last = self._last
        if last is not None and last[0] == written:
            return list(last[1])
        known, now_known = self._by_row, {}
        nodes = []
        for row in connection.execute(NODE_ROWS):
            key = (row.document, bool(row.ready), bool(row.unschedulable))
            node = known.get(key)
            if node is None:
                node = _node_of(json.loads(row.document), key[1], key[2])
            now_known[key] = node
            nodes.append(node)
        self._by_row = now_known  # one reference replaced: readers in other threads see either
        self._last = (written, nodes)
        return list(nodes)


def _node_of(spec: dict[str, object], ready: bool, unschedulable: bool) -> NodeSpec:
    return replace(decode_node(spec), ready=bool(ready), unschedulable=bool(unschedulable))


def update_node_state(
    connection: Connection,
    name: str,
    *,
    ready: bool | None,
    unschedulable: bool | None,
    now: float,
) -> NodeSpec | None:
    """Set the fields given of one node (one row, nothing else); the node as it is now, or
    None when there is no node of that name."""
    values: dict[str, object] = {"updated_at": now, "write_seq": next_write_seq(connection)}
    if ready is not None:
        values["ready"] = ready
    if unschedulable is not None:
        values["unschedulable"] = unschedulable
    connection.execute(update(NodeRow).where(NodeRow.name == name).values(values))
    row = connection.execute(select(*NODE_COLUMNS).where(NodeRow.name == name)).one_or_none()
    return None if row is None else _node_of(row.spec, row.ready, row.unschedulable)


def replace_nodes(connection: Connection, nodes: Sequence[NodeSpec], now: float) -> None:
    """Make the inventory ``nodes``, in this order; rows that did not change stay untouched."""
    names = [node.name for node in nodes]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidInputError(
            f"node {repeated[0]!r} is listed twice", hint="give every node a distinct name"
        )
    seq = next_write_seq(connection)
    stored = {
        row.name: (row.position, row.spec, row.ready, row.unschedulable)
        for row in connection.execute(select(NodeRow.name, NodeRow.position, *NODE_COLUMNS))
    }
    gone = set(stored) - set(names)
    if gone:
        connection.execute(delete(NodeRow).where(NodeRow.name.in_(sorted(gone))))
    added = []
    for position, node in enumerate(nodes):
        spec = encode_node(node)
        columns = {
            "position": position,
            "spec": spec,
            "ready": node.ready,
            "unschedulable": node.unschedulable,
            "updated_at": now,
            "write_seq": seq,
        }
        if node.name not in stored:
            added.append({"name": node.name, **columns})
        elif stored[node.name] != (position, spec, node.ready, node.unschedulable):
            connection.execute(update(NodeRow).where(NodeRow.name == node.name).values(columns))
    if added:
        connection.execute(insert(NodeRow), added)


def latest_policy_version(connection: Connection) -> int | None:
    version: int | None = connection.execute(
        select(func.max(PolicyVersionRow.version))
    ).scalar_one()
    return version


def read_policy(connection: Connection, version: int | None = None) -> ClusterPolicy | None:
    """The policy of ``version`` (default: the latest), or None when there is none."""
    query = select(PolicyVersionRow.policy)
    if version is None:
        query = query.order_by(PolicyVersionRow.version.desc()).limit(1)
    else:
        query = query.where(PolicyVersionRow.version == version)
    document = connection.execute(query).scalar_one_or_none()
    return None if document is None else decode_policy(document)


def insert_policy(connection: Connection, policy: ClusterPolicy, actor: str, now: float) -> int:
    latest = connection.execute(select(func.max(PolicyVersionRow.version))).scalar_one()
    version = (latest or 0) + 1
    try:
        connection.execute(
            insert(PolicyVersionRow).values(
                version=version, policy=encode_policy(policy), actor=actor, at=now
            )
        )
    except IntegrityError:
        raise ConcurrentUpdate(
            f"another writer saved policy version {version} at the same time; nothing was "
            "saved: read the current policy and apply the change again"
        ) from None
    return version
