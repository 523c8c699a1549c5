"""The models that cross the wire between the server and its clients (docs/architecture.md, rule 7).

One versioned package per API version: ``topoq.wire.v1`` is what ``/api/v1`` speaks. The
models speak of the domain only (an import-linter contract keeps it so), so the API and the
client share them without either depending on the other. A breaking change goes into a new
version package; the OpenAPI golden file (``tests/api/openapi.json``) makes it deliberate.
"""

WIRE_VERSIONS = ("v1",)
