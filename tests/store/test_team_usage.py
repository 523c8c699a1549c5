"""The teams' fair-share usage in the store, on SQLite and on PostgreSQL."""

from __future__ import annotations

from tests.store.conftest import StoreLocation
from topoq.core.fair_share import TeamUsage
from topoq.domain.governance import TeamName
from topoq.store import SqlStore

A, B, C = TeamName("a"), TeamName("b"), TeamName("c")


def test_a_new_store_has_no_usage(store: SqlStore) -> None:
    assert store.fair_share_usage() == {}


def test_saved_usage_reads_back_exactly_and_a_save_replaces_every_team(store: SqlStore) -> None:
    store.save_fair_share_usage({A: TeamUsage(0.125, 10.5), B: TeamUsage(1 / 3, 10.5)})
    assert store.fair_share_usage() == {A: TeamUsage(0.125, 10.5), B: TeamUsage(1 / 3, 10.5)}
    store.save_fair_share_usage({B: TeamUsage(0.25, 20.0), C: TeamUsage(0.0, 20.0)})
    assert store.fair_share_usage() == {B: TeamUsage(0.25, 20.0), C: TeamUsage(0.0, 20.0)}
    store.save_fair_share_usage({})
    assert store.fair_share_usage() == {}


def test_usage_survives_reopening_the_database(store_location: StoreLocation) -> None:
    with store_location.open() as first:
        first.save_fair_share_usage({A: TeamUsage(0.5, 100.0)})
    with store_location.open() as again:
        assert again.fair_share_usage() == {A: TeamUsage(0.5, 100.0)}
