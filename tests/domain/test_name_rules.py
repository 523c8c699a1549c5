"""The name rules beside the job-id and label grammar: subdomains (priority classes, queues)
and label values (flavors name the nodes' instance-type label)."""

from __future__ import annotations

import pytest

from topoq.domain.errors import InvalidInputError
from topoq.domain.names import check_label_value, check_subdomain_name


@pytest.mark.parametrize("good", ["training-priority", "a.b", "x" * 253])
def test_subdomain_names_are_accepted(good: str) -> None:
    assert check_subdomain_name(good, what="priority class name", where="w") == good


@pytest.mark.parametrize("bad", ["Top Priority", "a/b", "", "x" * 254, 7, None])
def test_other_subdomain_names_are_refused_naming_what_and_the_rule(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="not a valid priority class name") as raised:
        check_subdomain_name(bad, what="priority class name", where="w")
    assert "DNS-1123 subdomain" in (raised.value.hint or "")


@pytest.mark.parametrize("good", ["p5.48xlarge", "ml.p5.48xlarge", "Standard_ND96asr_v4", "a"])
def test_label_values_such_as_instance_types_are_accepted(good: str) -> None:
    assert check_label_value(good, what="flavor", where="w") == good


@pytest.mark.parametrize("bad", ["", "-lead", "trail.", "a/b", "a b", "x" * 64, 5])
def test_other_label_values_are_refused(bad: object) -> None:
    with pytest.raises(InvalidInputError, match="not a valid flavor"):
        check_label_value(bad, what="flavor", where="w")
