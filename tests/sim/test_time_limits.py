"""The simulator enforces time limits as the controller does: a run longer than its job's
limit ends at the limit, failed with TIME_LIMIT_REACHED and never retried."""

from __future__ import annotations

import pytest

from tests.sim.conftest import WriteScenario, entries, first, submit
from topoq.domain.errors import InvalidInputError
from topoq.sim import run_scenario


def test_a_run_longer_than_its_limit_ends_failed_at_the_limit(
    write_scenario: WriteScenario,
) -> None:
    events = [
        {"at": 0, "submit": submit("long", runtime_s=3600, time_limit="10m", max_retry=2)},
        {"at": 0, "submit": submit("fits", runtime_s=300, time_limit=600)},
    ]
    log = run_scenario(write_scenario(events)).log
    failed = first(log, "fail", "long")
    assert (failed.t, failed.reason) == (600, "TIME_LIMIT_REACHED")
    assert entries(log, "retry", "long") == [], "a time limit is not retried"
    assert len(entries(log, "start", "long")) == 1
    done = first(log, "finish", "fits")
    assert (done.t, done.reason) == (300, "SUCCEEDED")


def test_a_bad_scenario_time_limit_names_the_field(write_scenario: WriteScenario) -> None:
    path = write_scenario([{"at": 0, "submit": submit("x", time_limit="later")}])
    with pytest.raises(InvalidInputError, match=r"time_limit: expected a duration"):
        run_scenario(path)
