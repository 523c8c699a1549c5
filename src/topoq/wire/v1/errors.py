"""The one error shape every 4xx and 5xx answer has."""

from __future__ import annotations

from pydantic import Field

from topoq.wire.v1.base import WireModel


class ErrorDetail(WireModel):
    message: str = Field(description="What is wrong.")
    where: str | None = Field(
        default=None, description="The field or place, e.g. `document.spec.podSets[0].count`."
    )
    hint: str | None = Field(default=None, description="What is allowed, or how to fix it.")


class ErrorBody(WireModel):
    detail: ErrorDetail
