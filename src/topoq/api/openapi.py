"""Print the API's OpenAPI schema: ``python -m topoq.api.openapi > tests/api/openapi.json``.

The schema does not depend on any state, so the app is built around a service that is never
used."""

from __future__ import annotations

import json
from typing import Any, cast

from topoq.api.app import create_app
from topoq.api.service import Service


def openapi_schema() -> dict[str, Any]:
    app = create_app(cast(Service, None))
    return app.openapi()


def openapi_text() -> str:
    return json.dumps(openapi_schema(), indent=2, sort_keys=True) + "\n"


if __name__ == "__main__":
    print(openapi_text(), end="")
