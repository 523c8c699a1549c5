"""The base of every v1 wire model: camelCase on the wire, snake_case in Python, unknown
fields rejected (a typo must not silently drop a field). A model's validator and serializer
are built when it is first used (``defer_build``), not when it is imported: a CLI verb that reads
one answer pays for that answer's models, not for all of the API's (docs/cli.md, Start-up)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class WireModel(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel,
        validate_by_name=True,
        validate_by_alias=True,
        serialize_by_alias=True,
        extra="forbid",
        frozen=True,
        defer_build=True,
    )


ResourceAmounts = dict[str, str]
"""Resource name → readable Kubernetes quantity (``{"nvidia.com/gpu": "8", "memory": "1Ti"}``)."""
GpuCount = int | float
"""GPUs: a whole number (8), or with shares of one GPU a decimal (1.5)."""
