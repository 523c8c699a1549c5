"""A workload's shape is a key: equal shapes are one object while in use, hash alike, and
survive pickling with their hash worked out again."""

from __future__ import annotations

import pickle

from topoq.core.admission import Shape, workload_shape
from topoq.testing.builders import BLOCK
from topoq.testing.governance import job


def test_equal_workloads_have_one_shape_and_others_another() -> None:
    first = workload_shape(job("a", "t", 4, 8, required=BLOCK).spec.workload)
    same = workload_shape(job("b", "u", 4, 8, required=BLOCK).spec.workload)
    other = workload_shape(job("c", "t", 4, 8).spec.workload)
    assert first is same
    assert first != other and hash(first) != hash(other)


def test_a_pickled_shape_equals_and_hashes_as_the_original() -> None:
    shape = workload_shape(job("a", "t", 2, 4).spec.workload)
    again = pickle.loads(pickle.dumps(shape))
    assert isinstance(again, Shape)
    assert again == shape and hash(again) == hash(shape)
    assert {shape: 1}[again] == 1
