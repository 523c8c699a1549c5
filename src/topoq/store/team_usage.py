"""Each team's decayed fair-share usage in the ``team_usage`` table: read whole, and replaced
whole by the controller (one row per team; teams no longer given are removed)."""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from topoq.core.fair_share import TeamUsage
from topoq.domain.governance import TeamName
from topoq.store.schema import TeamUsageRow


def read_usage(connection: Connection) -> dict[TeamName, TeamUsage]:
    rows = connection.execute(select(TeamUsageRow.team, TeamUsageRow.share, TeamUsageRow.as_of))
    return {TeamName(row.team): TeamUsage(row.share, row.as_of) for row in rows}


def replace_usage(connection: Connection, usage: Mapping[TeamName, TeamUsage]) -> None:
    """Make the table ``usage``: update the teams it has, insert the new, delete the rest."""
    stored = set(connection.execute(select(TeamUsageRow.team)).scalars())
    gone = stored - set(usage)
    if gone:
        connection.execute(delete(TeamUsageRow).where(TeamUsageRow.team.in_(sorted(gone))))
    for team in sorted(set(usage) & stored):
        entry = usage[team]
        connection.execute(
            update(TeamUsageRow)
            .where(TeamUsageRow.team == team)
            .values(share=entry.share, as_of=entry.as_of_s)
        )
    new = [
        {"team": team, "share": usage[team].share, "as_of": usage[team].as_of_s}
        for team in sorted(set(usage) - stored)
    ]
    if new:
        connection.execute(insert(TeamUsageRow), new)
