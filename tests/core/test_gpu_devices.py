"""GPU devices inside nodes (``core.gpu_devices``): what fits, which device a share is packed
on, FGD's fragmentation measure worked out by hand, and the growth a placement would cause
held against the measure taken before and after it."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topoq.core.gpu_devices import (
    DeviceRoom,
    GpuAsk,
    fragmentation,
    fragmentation_growth,
    fragmentation_points,
    least_fragmenting,
    ties_to_tightest,
    typical_tasks,
)
from topoq.domain.errors import InvalidInputError


def room_of(devices: list[list[int]], cpu: int = 64_000, model: int = 0) -> DeviceRoom:
    slots = max(len(row) for row in devices)
    free = np.asarray([row + [0] * (slots - len(row)) for row in devices], dtype=np.int64)
    count = len(devices)
    return DeviceRoom(
        np.full(count, cpu, dtype=np.int64),
        np.full(count, 1 << 20, dtype=np.int64),
        free,
        np.full(count, model, dtype=np.int64),
        1000 * sum(len(row) for row in devices),
    )


@pytest.mark.parametrize(
    ("ask", "says"),
    [
        ({"count": 1, "milli": 0}, "0 thousandths"),
        ({"count": 1, "milli": 1500}, "1500 thousandths"),
        ({"count": 2, "milli": 500}, "part \\(500 thousandths\\) of each of 2 GPUs"),
        ({"count": 0, "milli": 300}, "300 thousandths of no GPU"),
        ({"cpu": -1}, "negative"),
    ],
)
def test_an_ask_no_pod_can_make_is_refused(ask: dict[str, int], says: str) -> None:
    with pytest.raises(InvalidInputError, match=says):
        GpuAsk(**ask)  # type: ignore[arg-type]


def test_a_share_fits_on_one_device_that_holds_it_and_whole_gpus_need_free_devices() -> None:
    room = room_of([[400, 400, 400], [1000, 0], [600, 1000]])
    share = GpuAsk(count=1, milli=500)
    assert room.fits(share).tolist() == [False, True, True]  # 1,200 free on node 0: no device
    assert room.fits(GpuAsk(count=2, milli=1000)).tolist() == [False, False, False]
    assert room.fits(GpuAsk(count=1, milli=1000)).tolist() == [False, True, True]
    assert room.devices_for(2, share) == (0,)  # the least free that holds it
    assert room.devices_for(1, GpuAsk(count=1, milli=1000)) == (0,)
    with pytest.raises(InvalidInputError, match="device 0 of node 0 has 400"):
        room.devices_for(0, share, device=0)
    taken = room.taking(2, share, (1,))
    assert taken.devices[2].tolist() == [600, 500, 0]
    assert taken.allocated_milli == room.allocated_milli + 500
    assert room.devices[2].tolist() == [600, 1000, 0]  # the room itself is untouched
    with pytest.raises(InvalidInputError, match="cannot host"):
        taken.taking(2, GpuAsk(count=1, milli=700), (1,))


def test_cpu_memory_and_the_gpu_model_decide_too() -> None:
    room = DeviceRoom.empty([8000, 2000], [100, 100], [2, 2], [0, 1])
    assert room.fits(GpuAsk(cpu=4000, count=1, milli=1000)).tolist() == [True, False]
    assert room.fits(GpuAsk(memory=200)).tolist() == [False, False]
    on_model_1 = GpuAsk(count=1, milli=1000, models=frozenset({1}))
    assert room.fits(on_model_1).tolist() == [False, True]
    assert room.capacity_milli == 4000 and room.allocated_milli == 0


def test_fragmentation_is_fgd_s_measure_worked_out_by_hand() -> None:
    # half the tasks ask for 600 thousandths of one GPU, a quarter for two whole GPUs, a
    # quarter for no GPU; CPU is plenty
    mix = typical_tasks(
        [GpuAsk(count=1, milli=600)] * 2 + [GpuAsk(count=2, milli=1000), GpuAsk(cpu=1000)],
        models=1,
    )
    assert sorted(mix.weight.tolist()) == [0.25, 0.25, 0.5]
    room = room_of([[1000, 1000], [1000, 500], [300, 200]])
    # node 0: the share class finds nothing too small (0), two whole GPUs fit (0), the
    # CPU-only class counts all 2,000 idle: 0.25 x 2000
    # node 1: the share class finds the 500 too small (500), two whole GPUs do not fit (all
    # 1,500), CPU-only all 1,500: 0.5 x 500 + 0.25 x 1500 + 0.25 x 1500
    # node 2: nothing fits anything: all 500 for every class
    assert fragmentation(room, mix).tolist() == [500.0, 1000.0, 500.0]
    assert fragmentation(room, mix, np.asarray([2])).tolist() == [500.0]


def test_the_typical_tasks_are_the_most_common_classes_making_the_share() -> None:
    asks = [GpuAsk(count=1, milli=1000)] * 6 + [GpuAsk(count=1, milli=500)] * 3 + [GpuAsk()]
    mix = typical_tasks(asks, models=1, share=0.9)
    assert mix.milli.tolist() == [1000, 500] and mix.weight.tolist() == [2 / 3, 1 / 3]
    with pytest.raises(InvalidInputError, match="no task"):
        typical_tasks([], models=1)


def test_fgd_s_points_fall_with_growth_and_ties_go_to_the_tightest_node() -> None:
    points = fragmentation_points(np.asarray([-5000.0, 0.0, 40.0, 5000.0]))
    assert points.tolist() == [99, 50, 49, 0]
    # two placements score alike (growth 10 and 20 both 49 points): the tighter one wins
    assert least_fragmenting(np.asarray([10.0, 20.0, 900.0]), np.asarray([0.5, 0.1, 0.0])) == 1
    assert least_fragmenting(np.asarray([10.0, 10.0]), np.asarray([0.2, 0.2])) == 0
    assert least_fragmenting(np.asarray([10.0, 20.0, 900.0]), None) == 0  # the first


def test_ties_go_to_the_tightest_node_unless_tasks_need_models_the_pod_does_not() -> None:
    any_model, on_model_1 = (
        GpuAsk(count=1, milli=1000),
        GpuAsk(count=1, milli=1000, models=frozenset({1})),
    )
    untyped = typical_tasks([any_model, GpuAsk(count=1, milli=500)], models=2)
    typed = typical_tasks([any_model, on_model_1], models=2)
    assert ties_to_tightest(any_model, untyped) and ties_to_tightest(on_model_1, untyped)
    assert not ties_to_tightest(any_model, typed) and ties_to_tightest(on_model_1, typed)


free_device = st.sampled_from([0, 100, 250, 400, 500, 750, 1000])


@st.composite
def rooms_and_asks(draw: st.DrawFn) -> tuple[DeviceRoom, list[GpuAsk]]:
    nodes = draw(st.integers(1, 6))
    slots = draw(st.integers(1, 4))
    devices = [[draw(free_device) for _ in range(slots)] for _ in range(nodes)]
    cpu = [draw(st.integers(0, 8)) * 1000 for _ in range(nodes)]
    model = [draw(st.integers(0, 1)) for _ in range(nodes)]
    room = DeviceRoom(
        np.asarray(cpu, dtype=np.int64),
        np.full(nodes, 100, dtype=np.int64),
        np.asarray(devices, dtype=np.int64),
        np.asarray(model, dtype=np.int64),
        nodes * slots * 1000,
    )
    ask = st.one_of(
        st.builds(GpuAsk, cpu=st.integers(0, 4).map(lambda c: c * 1000)),
        st.builds(
            GpuAsk,
            cpu=st.integers(0, 4).map(lambda c: c * 1000),
            count=st.just(1),
            milli=st.sampled_from([100, 300, 500, 1000]),
            models=st.sampled_from([frozenset(), frozenset({1})]),
        ),
        st.builds(GpuAsk, count=st.integers(2, 3), milli=st.just(1000)),
    )
    return room, draw(st.lists(ask, min_size=1, max_size=6))


@settings(max_examples=150, deadline=None)
@given(rooms_and_asks())
def test_the_growth_of_a_placement_is_the_measure_after_it_less_before(
    drawn: tuple[DeviceRoom, list[GpuAsk]],
) -> None:
    room, asks = drawn
    mix = typical_tasks(asks, models=2, share=1.0)
    for ask in asks:
        fit = np.flatnonzero(room.fits(ask))
        growth, device = fragmentation_growth(room, ask, mix, fit)
        for at, node in enumerate(fit):
            before = fragmentation(room, mix, np.asarray([node]))[0]
            options = (
                [int(d) for d in np.flatnonzero(room.devices[node] >= ask.milli)]
                if ask.shares_a_device
                else [None]
            )
            after = {
                option: fragmentation(
                    room.taking(node, ask, room.devices_for(node, ask, option)),
                    mix,
                    np.asarray([node]),
                )[0]
                for option in options
            }
            least = min(after.values())
            assert growth[at] == pytest.approx(least - before)
            if ask.shares_a_device:  # a device that grows it least (ties within rounding)
                assert after[int(device[at])] == pytest.approx(least)
            else:
                assert int(device[at]) == -1


@settings(max_examples=80, deadline=None)
@given(rooms_and_asks(), st.lists(st.integers(0, 5), min_size=1, max_size=30))
def test_placing_where_it_fits_never_overcommits_a_device(
    drawn: tuple[DeviceRoom, list[GpuAsk]], picks: list[int]
) -> None:
    room, asks = drawn
    mix = typical_tasks(asks, models=2, share=1.0)
    allocated = room.allocated_milli
    for turn, pick in enumerate(picks):
        ask = asks[turn % len(asks)]
        fit = np.flatnonzero(room.fits(ask))
        if not len(fit):
            continue
        growth, device = fragmentation_growth(room, ask, mix, fit)
        at = least_fragmenting(growth, None) if pick % 2 else pick % len(fit)
        node = int(fit[at])
        chosen = int(device[at]) if ask.shares_a_device else None
        room = room.taking(node, ask, room.devices_for(node, ask, chosen))
        allocated += ask.gpu_milli
        assert (room.devices >= 0).all() and (room.devices <= 1000).all()
        assert (room.cpu >= 0).all() and room.allocated_milli == allocated
