"""Every document topoq reads goes through one strict reader: bounded, one key once, no bombs."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from topoq.discovery.documents import (
    Fields,
    documents_in_text,
    parse_document,
    parse_json_text,
    read_document,
)
from topoq.domain.errors import InvalidInputError
from topoq.domain.limits import MAX_DOCUMENT_BYTES


def refusal(text: str) -> InvalidInputError:
    with pytest.raises(InvalidInputError) as raised:
        parse_document(text, source="f.yaml")
    return raised.value


@pytest.mark.parametrize(
    "text",
    [
        "[" * 100_000 + "]" * 100_000,
        '{"a": ' * 5_000 + "1" + "}" * 5_000,
        "a: " + "[" * 900 + "]" * 900,
        "a:\n" + "".join("  " * depth + f"k{depth}:\n" for depth in range(1, 200)) + "  x: 1",
    ],
    ids=["json-lists", "json-objects", "yaml-flow", "yaml-block"],
)
def test_deep_nesting_is_refused_as_nesting_not_a_recursion_error(text: str) -> None:
    assert "nested more than 64 levels" in refusal(text).message


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ('{"a": 1,\n "b": {"x": 1,\n   "x": 2}}', "f.yaml:3:4"),
        ('{"a": 1,\n "b": 2,\n "a": 3}', "f.yaml:3:2"),
        ("a: 1\nb:\n  c: 1\n  c: 2\n", "f.yaml:4:3"),
    ],
)
def test_a_key_given_twice_is_refused_naming_the_key_and_its_line(text: str, where: str) -> None:
    error = refusal(text)
    assert "given twice" in error.message
    assert error.where == where


def test_a_duplicate_key_in_concatenated_json_pages_is_refused() -> None:
    with pytest.raises(InvalidInputError, match="'Instances' is given twice"):
        documents_in_text('{"Instances": []}\n{"Instances": [], "Instances": []}', source="t")


def test_a_yaml_alias_bomb_is_refused_at_once() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]" for i in range(1, 12)]
    started = time.thread_time()
    error = refusal("\n".join(lines))
    assert time.thread_time() - started < 1
    assert "alias" in error.message


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"gpu": ' + "9" * 5000 + "}", "more than 30 digits"),
        ("gpu: " + "9" * 5000, "more than 30 digits"),
        ('{"gpu": NaN}', "not a finite number"),
        ('{"gpu": Infinity}', "not a finite number"),
        ("gpu: .inf", "not a finite number"),
        ("gpu: !!binary aGVsbG8=", "JSON cannot hold"),
        ("!!set {a, b}", "JSON cannot hold"),
        ("1: one", "not a string"),
        ("base: {x: 1}\nuse: {<<: {x: 2}}", "merge key"),
    ],
)
def test_values_json_cannot_hold_are_refused(text: str, message: str) -> None:
    assert message in refusal(text).render()


def test_a_yaml_timestamp_stays_a_string_as_in_json() -> None:
    assert parse_document("created: 2024-01-01", source="f") == {"created": "2024-01-01"}


def test_a_limit_error_names_the_file_and_the_field_path() -> None:
    error = refusal('{"items": [{"cpu": NaN}]}')
    assert error.where == "f.yaml: items[0].cpu"


def test_every_error_is_one_line() -> None:
    assert "\n" not in refusal("a: \x00").render()


def test_a_file_larger_than_the_limit_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "huge.json"
    path.write_bytes(b"[" + b" " * MAX_DOCUMENT_BYTES + b"]")
    with pytest.raises(InvalidInputError, match="larger than 16 MiB"):
        read_document(path)


def test_a_binary_file_is_refused_as_not_utf8(tmp_path: Path) -> None:
    path = tmp_path / "image.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n\xff\xfe")
    with pytest.raises(InvalidInputError, match="not UTF-8"):
        read_document(path)


def test_a_utf8_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b'\xef\xbb\xbf{"a": 1}')
    assert read_document(path) == {"a": 1}


def test_a_json_string_inside_a_document_is_read_as_strictly() -> None:
    with pytest.raises(InvalidInputError, match="given twice"):
        parse_json_text('{"a": 1, "a": 2}', source="annotation")


def test_reading_a_large_document_stays_fast() -> None:
    items = ",".join(f'{{"name": "n{i}", "labels": {{"a": "b", "c": "d"}}}}' for i in range(50_000))
    started = time.thread_time()
    parse_document('{"items": [' + items + "]}", source="nodes.json")
    yaml_text = "".join(f"- name: n{i}\n  labels: {{a: b, c: d}}\n" for i in range(20_000))
    parse_document(yaml_text, source="nodes.yaml")
    assert time.thread_time() - started < 10  # about a second on an idle machine


@pytest.mark.parametrize("value", [1, 2.5, True, ["a"], {"a": "b"}])
def test_a_name_field_refuses_what_is_not_a_string(value: object) -> None:
    with pytest.raises(InvalidInputError, match="expected a string") as raised:
        Fields({"name": value}, "job.yaml").text("name")
    assert raised.value.where == "job.yaml.name"


def test_an_endless_file_is_read_only_up_to_the_limit() -> None:
    zero = Path("/dev/zero")
    if not zero.exists():  # pragma: no cover - every Linux and macOS has it
        pytest.skip("no /dev/zero")
    with pytest.raises(InvalidInputError, match="larger than 16 MiB"):
        read_document(zero)


def test_several_kubernetes_objects_separated_by_dashes_are_read_as_one_list() -> None:
    text = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\n---\n" + (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\n---\n"
    )
    document = parse_document(text, source="f.yaml")
    assert document["apiVersion"] == "v1" and document["kind"] == "List"
    assert [item["metadata"]["name"] for item in document["items"]] == ["a", "b"]


def test_several_documents_that_are_not_kubernetes_objects_are_refused() -> None:
    error = refusal("apiVersion: v1\nkind: Pod\n---\njob_name: x\n")
    assert "document 2 of 2 is not a Kubernetes object" in error.message
    assert error.where == "f.yaml"


def test_one_document_after_a_leading_separator_is_that_document() -> None:
    assert parse_document("---\na: 1\n", source="f.yaml") == {"a": 1}
