"""A cycle handed the last cycle's eviction order brings it up to date by the holders that
came and went (``state._eviction_since``) instead of sorting every holder again: the order it
gets must be the one sorting gives, whichever views stayed, left, came or changed."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.cycle.state import EvictionOrder, _eviction_since
from topoq.core.ordering import eviction_key, eviction_order
from topoq.domain.job import JobPhase, JobView
from topoq.testing.governance import job, policy, team

RULES = policy(team("a", 64), team("b", 64), classes={"high": 100, "low": 10})


def running(name: str, priority: str, started: float) -> JobView:
    view = job(name, "a" if name < "m" else "b", priority=priority)
    return replace(view, phase=JobPhase.RUNNING, admitted_at=started, started_at=started)


holder = st.tuples(
    st.sampled_from("abcdefghjkmnpqrstuvwxyz"),
    st.sampled_from(["high", "low"]),
    st.integers(0, 5).map(float),
)


@settings(max_examples=200, deadline=None)
@given(
    before=st.lists(holder, max_size=12, unique_by=lambda h: h[0]),
    kept=st.lists(st.booleans(), min_size=12, max_size=12),
    changed=st.lists(st.booleans(), min_size=12, max_size=12),
    came=st.lists(holder, max_size=6, unique_by=lambda h: h[0]),
)
def test_the_order_brought_up_to_date_is_the_order_sorted(
    before: list[tuple[str, str, float]],
    kept: list[bool],
    changed: list[bool],
    came: list[tuple[str, str, float]],
) -> None:
    views = [running(f"old-{n}", p, t) for n, p, t in before]
    ordered = eviction_order(RULES, views)
    known = EvictionOrder(
        tuple(ordered),
        tuple(eviction_key(RULES, view) for view in ordered),
        frozenset(map(id, ordered)),
    )
    now: list[JobView] = []
    for view, keep, moved in zip(views, kept, changed, strict=False):
        if keep:  # the very same view, or the same job seen anew (started again later)
            now.append(replace(view, started_at=(view.started_at or 0) + 1) if moved else view)
    now += [running(f"new-{n}", p, t) for n, p, t in came]
    got, keys = _eviction_since(RULES, known, tuple(now), frozenset(map(id, now)))
    assert got == eviction_order(RULES, now)
    assert keys == [eviction_key(RULES, view) for view in got]
    assert len(known.jobs) == len(views)  # the order handed on is left as it was
