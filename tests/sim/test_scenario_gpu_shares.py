"""A scenario asks for part of a GPU as a job file does (``gpus: 0.5``): packed onto one device
of a node its cluster opens to shares, counted as that part of a GPU; where no node is open, the
job waits saying how to open one. Bad counts are refused with the field's own bounds."""

from __future__ import annotations

import pytest

from tests.sim.conftest import WriteScenario, entries, submit
from topoq.domain.errors import InvalidInputError
from topoq.domain.gpu_share import GPU_SHARE
from topoq.sim import load_scenario
from topoq.sim.engine import Simulation
from topoq.sim.events import Submit

OPEN = {
    "generate": {
        "shape": [1, 2],
        "instance_type": "p5.48xlarge",
        "labels": {"topoq.io/gpu-sharing": "true"},
    }
}
POLICY = {"teams": [{"name": "nlp", "quotas": [{"flavor": "p5.48xlarge", "instances": 2}]}]}


def test_a_share_per_pod_is_packed_on_one_device_and_counted_as_its_part(
    write_scenario: WriteScenario,
) -> None:
    path = write_scenario(
        [
            {"at": 0, "submit": submit("halves", pods=3, gpus=0.5)},
            {"at": 0, "submit": submit("quarter", pods=1, gpus="250m")},
        ],
        cluster=OPEN,
        policy=POLICY,
    )
    scenario = load_scenario(path)
    action = scenario.events[0].action
    assert isinstance(action, Submit)
    assert action.spec.workload.pod_sets[0].requests.amount(GPU_SHARE) == 500
    result = Simulation(scenario).run()
    admitted = {entry.job: entry for entry in entries(result.log, "admit")}
    assert set(admitted) == {"halves", "quarter"}
    assert admitted["halves"].gpus == 1.5 and admitted["quarter"].gpus == 0.25
    assert not result.left_pending


def test_a_share_where_no_node_is_open_waits_saying_how_to_open_one(
    write_scenario: WriteScenario,
) -> None:
    path = write_scenario([{"at": 0, "submit": submit("nb", pods=2, gpus=0.5)}])
    (waiting,) = Simulation(load_scenario(path)).run().left_pending
    assert waiting.job == "nb"
    assert "asks for a share of one GPU (0.5 nvidia.com/gpu)" in (waiting.message or "")
    assert "open to GPU shares" in (waiting.message or "")


@pytest.mark.parametrize(
    ("fields", "said"),
    [
        ({"gpus": 1.5}, "neither whole GPUs nor a share of one GPU"),
        ({"gpus": 0}, "give whole GPUs per pod (1 to 1,000,000), or a share of one GPU"),
        ({"gpus": 1e30}, "give whole GPUs per pod (1 to 1,000,000)"),
        ({"gpus": True}, "expected a number of GPUs"),
        ({"gpus": 0.5, "pods": 1.5}, "give a whole number from 1 to"),
    ],
)
def test_bad_gpu_and_pod_counts_say_what_to_write(
    write_scenario: WriteScenario, fields: dict[str, object], said: str
) -> None:
    path = write_scenario([{"at": 0, "submit": submit("x", **fields)}])
    with pytest.raises(InvalidInputError) as caught:
        load_scenario(path)
    text = str(caught.value)
    assert said in text
    assert "9,223,372,036,854,775,807" not in text  # a field's own bounds, not int64's
