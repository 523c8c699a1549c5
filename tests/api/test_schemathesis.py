"""A short property-based run of every operation of the OpenAPI schema against the app,
in-process (schemathesis over ASGI): generated requests must never get a 5xx, and every answer
must be one the schema describes. As admin the requests are valid ones and invalid ones (wrong
types, missing fields, values out of range); without a token, valid ones. Every 4xx must
carry a message, and every answer come within a second.

The run starts from a fresh app over a fresh store (the cluster and policy of the other API
tests), so the node and token actions the fuzzer takes touch no other test. A few examples per
operation: a smoke test that stays well under a minute, not a search."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.api.conftest import TEAM, Api, make_api, small_job
from topoq.api.app import create_app
from topoq.api.service import Service


def refusal_says_what_to_fix(ctx: Any, response: Any, case: Any) -> bool | None:
    """Every 4xx carries the error shape with a message (docs/api.md, Errors)."""
    if 400 <= response.status_code < 500:
        detail = response.json().get("detail")
        assert isinstance(detail, dict) and detail.get("message"), response.text
    return None


def answered_within_a_second(ctx: Any, response: Any, case: Any) -> bool | None:
    assert response.elapsed < MAX_ANSWER_S, f"{case.method} {case.path}: {response.elapsed:.2f} s"
    return None


MAX_ANSWER_S = 5.0
"""Catches a request that hangs or works in proportion to a generated number (an offset, a
limit); not a speed target — a loaded 2-core CI machine answered an ordinary request in 1.3 s."""
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    refusal_says_what_to_fix,
    answered_within_a_second,
]
EXAMPLES_PER_OPERATION = int(os.environ.get("TOPOQ_FUZZ_EXAMPLES", "12"))
"""Raise it for a longer search: ``TOPOQ_FUZZ_EXAMPLES=500 pytest tests/api/test_schemathesis.py``
(with ``TOPOQ_FUZZ_RANDOM=1`` for other examples than the fixed ones CI runs)."""
JOB, NODE = "fuzzed-job", "p5-0001"
POSITIVE, NEGATIVE = schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE


def operations() -> list[tuple[str, str]]:
    paths = create_app(Service.__new__(Service)).openapi()["paths"]
    return sorted((method.upper(), path) for path, item in paths.items() for method in item)


ATTEMPTS = (
    ("admin", POSITIVE, "known"),
    ("admin", POSITIVE, "generated"),
    ("admin", NEGATIVE, "generated"),
    ("anonymous", POSITIVE, "generated"),
)
"""Who calls, valid or invalid requests, and path parameters that name a job, node and token
that exist (so that the routes get past their 404) or generated ones."""
RUNS = [
    pytest.param(method, path, who, mode, ids, id=f"{method} {path} {who} {mode.value} {ids}")
    for method, path in operations()
    for who, mode, ids in ATTEMPTS
    if not (path == "/healthz" and (mode is NEGATIVE or ids == "known"))  # nothing to vary
]


@dataclass
class Fuzzed:
    api: Api
    schema: Any
    known: dict[str, str]
    """A value for each path parameter that names something that exists."""


@pytest.fixture(scope="module")
def fuzzed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fuzzed]:
    for api in make_api(Path(tmp_path_factory.mktemp("schemathesis"))):
        submitted = api.client.post(
            "/api/v1/jobs", json=small_job(JOB), headers=api.headers("admin")
        )
        assert submitted.status_code == 201, submitted.text
        api.controller.step()
        _, token = api.store.create_token("fuzzed-token", "member", [TEAM])
        known = {"job_id": JOB, "name": NODE, "token_id": token.id}
        schema = schemathesis.openapi.from_asgi("/openapi.json", api.client.app)
        yield Fuzzed(api, schema, known)


@pytest.mark.parametrize(("method", "path", "who", "mode", "ids"), RUNS)
def test_no_generated_request_gets_a_server_error(
    fuzzed: Fuzzed, method: str, path: str, who: str, mode: schemathesis.GenerationMode, ids: str
) -> None:
    operation = fuzzed.schema[path][method]
    token = fuzzed.api.headers(who) if who != "anonymous" else {}
    known = {name: value for name, value in fuzzed.known.items() if f"{{{name}}}" in path}
    strategy = operation.as_strategy(
        generation_mode=mode, path_parameters=known if ids == "known" else None
    )

    @settings(
        max_examples=EXAMPLES_PER_OPERATION,
        deadline=None,
        derandomize=not os.environ.get("TOPOQ_FUZZ_RANDOM"),
        database=None,
        phases=[Phase.explicit, Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def call(case: Any) -> None:
        generated = case.headers or {}
        case.headers = {k: v for k, v in generated.items() if k.lower() != "authorization"}
        response = case.call(headers=token)
        case.validate_response(response, checks=CHECKS, headers=token)

    call()
