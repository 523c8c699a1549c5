"""Kueue's topology assignments in both forms; the v1beta2 sample is one real Kueue 0.17 wrote
for a two-pod required-topology Job (tests/k8s checks one it writes again)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from topoq.discovery.kueue_assignment import (
    Domain,
    TopologyAssignment,
    read_assignment,
    v1beta1_document,
    v1beta2_document,
)
from topoq.domain.errors import InvalidInputError

WRITTEN_BY_KUEUE = {
    "levels": ["kubernetes.io/hostname"],
    "slices": [
        {
            "domainCount": 2,
            "podCounts": {"universal": 1},
            "valuesPerLevel": [{"individual": {"prefix": "node-b0-r1-h", "roots": ["0", "1"]}}],
        }
    ],
}


def test_the_compressed_form_kueue_wrote_reads_as_its_domains() -> None:
    assignment = read_assignment(WRITTEN_BY_KUEUE)
    assert assignment.domains == (
        Domain(("node-b0-r1-h0",), 1),
        Domain(("node-b0-r1-h1",), 1),
    )
    assert v1beta2_document(assignment) == WRITTEN_BY_KUEUE


def test_both_forms_of_one_assignment_read_alike() -> None:
    assignment = TopologyAssignment(
        ("block", "kubernetes.io/hostname"),
        (
            Domain(("b1", "p5-0001.x"), 2),
            Domain(("b1", "p5-0002.x"), 1),
            Domain(("b2", "p5-0017.x"), 1),
        ),
    )
    compressed = v1beta2_document(assignment)
    assert [s["domainCount"] for s in compressed["slices"]] == [2, 1]
    first = compressed["slices"][0]["valuesPerLevel"]
    assert first[0] == {"universal": "b1"}
    assert first[1] == {"individual": {"roots": ["1", "2"], "prefix": "p5-000", "suffix": ".x"}}
    assert read_assignment(compressed) == assignment
    assert read_assignment(v1beta1_document(assignment)) == assignment


values = st.text(alphabet="ab0-", min_size=1, max_size=6)


@given(
    st.lists(
        st.tuples(st.sampled_from(["x", "y"]), values, st.integers(1, 4)), min_size=1, max_size=12
    )
)
def test_writing_then_reading_gives_back_the_assignment(rows: list[tuple[str, str, int]]) -> None:
    assignment = TopologyAssignment(
        ("block", "host"), tuple(Domain((block, host), pods) for block, host, pods in rows)
    )
    assert read_assignment(v1beta2_document(assignment)) == assignment
    assert read_assignment(v1beta1_document(assignment)) == assignment


def test_an_assignment_of_more_domains_than_kueue_allows_is_refused() -> None:
    huge = {
        "levels": ["host"],
        "slices": [
            {
                "domainCount": 10**9,
                "podCounts": {"universal": 1},
                "valuesPerLevel": [{"universal": "h"}],
            }
        ],
    }
    with pytest.raises(InvalidInputError, match="more than 100,000 domains"):
        read_assignment(huge)
