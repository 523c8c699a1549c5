"""The shared name grammar and document limits every input path uses."""

from __future__ import annotations

import pytest

from topoq.domain.errors import InvalidInputError
from topoq.domain.limits import DocumentLimits, check_document
from topoq.domain.names import check_job_id, check_label_name, is_dns_label, is_dns_subdomain


@pytest.mark.parametrize("good", ["a", "llama-pretrain-7", "a.b-c.d", "0", "x" * 253])
def test_job_ids_that_are_dns_subdomains_are_accepted(good: str) -> None:
    assert check_job_id(good, where="id") == good


@pytest.mark.parametrize(
    "bad",
    ["", "vision:secret-run", "vision_secret-run", "Upper", "../../etc/passwd", "slash/inside",
     "a..b", "-lead", "trail-", ".", "..", "nul\0", "x" * 254, 42, None],
)  # fmt: skip
def test_job_ids_outside_the_grammar_are_refused_naming_the_rule(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="not a valid job id") as raised:
        check_job_id(bad, where="id")
    assert raised.value.where == "id"
    assert "DNS-1123" in (raised.value.hint or "")


def test_labels_are_at_most_63_characters_without_dots() -> None:
    assert is_dns_label("nlp-research") and is_dns_label("x" * 63)
    assert not is_dns_label("x" * 64) and not is_dns_label("a.b")
    assert is_dns_subdomain("a.b")
    with pytest.raises(InvalidInputError, match="not a valid team name"):
        check_label_name("Team A", what="team name", where="teams[0].name")


def test_a_document_within_the_limits_passes() -> None:
    check_document({"a": [1, 2.5, "x", None, True, {"b": []}]}, where="doc")


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ({"gpu": float("inf")}, "not a finite number"),
        ({"gpu": float("nan")}, "not a finite number"),
        ({"cpu": 10**5000}, "more than 30 digits"),
        ({1: "x"}, "not a string"),
        ({"when": object()}, "JSON cannot hold"),
        ({"s": "x" * 11}, "string of 11 characters"),
    ],
)
def test_a_document_that_breaks_a_limit_is_refused(document: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        check_document(document, where="doc", limits=DocumentLimits(max_string_chars=10))


def test_nesting_is_checked_without_recursion_and_the_path_is_cut() -> None:
    deep: list[object] = []
    for _ in range(100_000):  # far past Python's recursion limit
        deep = [deep]
    with pytest.raises(InvalidInputError, match="nested more than 64 levels") as raised:
        check_document({"top": deep}, where="doc")
    assert len(raised.value.where or "") < 200


def test_entries_are_counted_over_the_whole_document() -> None:
    with pytest.raises(InvalidInputError, match="more than 10 entries"):
        check_document([[1] * 6, [2] * 6], where="doc", limits=DocumentLimits(max_entries=10))
