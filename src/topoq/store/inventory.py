"""The node inventory and the policy versions in tables."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.engine import Connection
from sqlalchemy.exc import IntegrityError

from topoq.domain.errors import InvalidInputError
from topoq.domain.governance import ClusterPolicy
from topoq.domain.node import NodeSpec
from topoq.store.codec import decode_node, encode_node
from topoq.store.errors import ConcurrentUpdate
from topoq.store.policy_codec import decode_policy, encode_policy
from topoq.store.schema import NodeRow, PolicyVersionRow


def read_nodes(connection: Connection) -> list[NodeSpec]:
    rows = connection.execute(select(NodeRow.spec).order_by(NodeRow.position, NodeRow.name))
    return [decode_node(spec) for spec in rows.scalars()]


def replace_nodes(connection: Connection, nodes: Sequence[NodeSpec], now: float) -> None:
    """Make the inventory ``nodes``, in this order; rows that did not change stay untouched."""
    names = [node.name for node in nodes]
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InvalidInputError(
            f"node {repeated[0]!r} is listed twice", hint="give every node a distinct name"
        )
    stored = {
        row.name: (row.position, row.spec)
        for row in connection.execute(select(NodeRow.name, NodeRow.position, NodeRow.spec))
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
        }
        if node.name not in stored:
            added.append({"name": node.name, **columns})
        elif stored[node.name] != (position, spec):
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
