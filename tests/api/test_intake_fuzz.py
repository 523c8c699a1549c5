"""Fuzzed bodies for the two routes that store documents, ``POST /jobs`` and ``PUT /policy``:
valid documents mutated (values replaced by other types, huge or non-finite numbers, NUL and
odd strings, deep nesting; keys dropped or added) and the raw body bent (UTF-16, a duplicate
key, truncation, deep nesting). Every answer is a success that stored one thing, or a clean
4xx with a message that stored nothing — never a 5xx — within a second."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api.conftest import POLICY_FILE, Api, make_api, small_job
from topoq.domain.names import is_dns_subdomain

V1 = "/api/v1"
EXAMPLES = 60
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=1000,  # ms: every answer within a second
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)

Path_ = tuple[str | int, ...]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**25, max_value=10**40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=20),
    st.text(alphabet=st.sampled_from("\x00\ud7ff\ufffe=/.:-_ aZ9é\n"), max_size=12),
    st.sampled_from(["8", "0.5", "1e400", "9" * 5_000, "Infinity", "-1", "16Gi", ""]),
)
values = st.recursive(
    scalars,
    lambda children: st.one_of(
        st.lists(children, max_size=3), st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=8,
)


def paths_of(value: Any, path: Path_ = ()) -> Iterator[Path_]:
    yield path
    if isinstance(value, dict):
        for key, child in value.items():
            yield from paths_of(child, (*path, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from paths_of(child, (*path, index))


def parent_of(document: Any, path: Path_) -> Any:
    for part in path[:-1]:
        document = document[part]
    return document


@st.composite
def mutated(draw: st.DrawFn, base: dict[str, Any]) -> dict[str, Any]:
    """``base`` with one to three fields replaced, dropped or added."""
    document = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 3))):
        inner = [p for p in paths_of(document) if p]
        if not inner:
            break
        path = draw(st.sampled_from(inner))
        parent, last = parent_of(document, path), path[-1]
        action = draw(st.sampled_from(["replace", "drop", "add", "nest"]))
        if action == "replace":
            parent[last] = draw(values)
        elif action == "drop":
            del parent[last]
        elif action == "nest":
            depth = draw(st.sampled_from([10, 70]))
            parent[last] = json.loads("[" * depth + "1" + "]" * depth)
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=10))] = draw(values)
        else:
            parent.append(draw(values))
    return document


def bent(draw: st.DrawFn, document: dict[str, Any]) -> tuple[bytes, bool]:
    """The document's JSON text, perhaps bent out of shape on the way to the wire, and
    whether the bending alone must get it refused."""
    text = json.dumps(document)
    how = draw(st.sampled_from(["as is", "utf-16", "duplicate", "truncate", "deep", "bom"]))
    if how == "utf-16":
        return text.encode("utf-16"), True
    if how == "duplicate" and isinstance(document, dict) and document:
        key = json.dumps(draw(st.sampled_from(sorted(document))))
        return ("{" + key + ": 1, " + text[1:]).encode(), True
    if how == "truncate":
        return text[: draw(st.integers(0, max(len(text) - 1, 0)))].encode(), True
    if how == "deep":
        depth = draw(st.sampled_from([65, 100_000]))
        return ("[" * depth + text + "]" * depth).encode(), True
    if how == "bom":
        return b"\xef\xbb\xbf" + text.encode(), True
    return text.encode(), False


@st.composite
def bodies(draw: st.DrawFn, base: dict[str, Any]) -> tuple[bytes, bool]:
    return bent(draw, draw(mutated(base)))


def send(api: Api, method: str, path: str, body: bytes) -> Any:
    headers = {**api.headers("admin"), "Content-Type": "application/json"}
    return api.client.request(method, f"{V1}{path}", content=body, headers=headers)


def assert_clean(
    response: Any, stored_before: int, stored_after: int, *, ok: int, must_refuse: bool
) -> None:
    assert response.status_code < 500, response.text
    if response.status_code == ok and not must_refuse:
        assert stored_after == stored_before + 1
        return
    assert 400 <= response.status_code < 500, response.text
    assert response.json()["detail"]["message"], response.text
    assert stored_after == stored_before, response.text


@pytest.fixture(scope="module")
def fuzzed_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Api]:
    yield from make_api(Path(tmp_path_factory.mktemp("fuzz")))


def test_a_fuzzed_job_submission_is_stored_whole_or_refused_cleanly(fuzzed_api: Api) -> None:
    api, names = fuzzed_api, iter(range(10**9))

    @FUZZ
    @given(case=bodies(small_job("fuzzed")))
    def submit(case: tuple[bytes, bool]) -> None:
        body, must_refuse = case
        body = body.replace(b'"fuzzed"', f'"fuzzed-{next(names)}"'.encode(), 1)  # a fresh id
        before = api.store.count_jobs()
        response = send(api, "POST", "/jobs", body)
        assert_clean(response, before, api.store.count_jobs(), ok=201, must_refuse=must_refuse)
        if response.status_code == 201:  # what was stored can be managed by its id
            job_id = response.json()["id"]
            assert is_dns_subdomain(job_id), job_id
            cancel = api.client.post(f"{V1}/jobs/{job_id}/cancel", headers=api.headers("admin"))
            assert cancel.status_code == 200, cancel.text

    submit()


def test_a_fuzzed_policy_is_a_new_version_or_refused_cleanly(fuzzed_api: Api) -> None:
    api = fuzzed_api
    policy = yaml.safe_load(POLICY_FILE.read_text(encoding="utf-8"))

    @FUZZ
    @given(case=bodies(policy))
    def put(case: tuple[bytes, bool]) -> None:
        body, must_refuse = case
        before = len(api.store.policy_versions())
        response = send(api, "PUT", "/policy", body)
        after = len(api.store.policy_versions())
        assert_clean(response, before, after, ok=200, must_refuse=must_refuse)

    put()
