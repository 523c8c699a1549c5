"""A small typed client of topoq's REST API (http.client and the wire models)."""

from topoq.client.config import ClientSettings, resolve_settings
from topoq.client.http import ClientError, TopoqClient

__all__ = ["ClientError", "ClientSettings", "TopoqClient", "resolve_settings"]
