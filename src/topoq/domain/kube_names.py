"""Names as Kubernetes takes them: topoq's ids (jobs, teams, flavors, cohorts) made DNS-1123
labels, injectively."""

from __future__ import annotations

import hashlib
import re

DNS_LABEL_LIMIT = 63
_NOT_IN_LABEL = re.compile(r"[^a-z0-9-]+")
_NOT_IN_SUBDOMAIN = re.compile(r"[^a-z0-9.-]+")
_NAME_HASH_LENGTH = 8


def kube_name(text: str, *, limit: int = DNS_LABEL_LIMIT, dots: bool = False) -> str:
    """``text`` as a DNS-1123 label of at most ``limit`` characters: lower case, runs of other
    characters as ``-``; when that changed anything (or cut it short), a hash of the original
    is appended, so that different texts never share a name. ``dots``: a DNS-1123 subdomain
    (dots kept), as object names such as a ResourceFlavor's may be."""
    not_in = _NOT_IN_SUBDOMAIN if dots else _NOT_IN_LABEL
    cleaned = not_in.sub("-", text.lower()).strip("-.") or "x"
    if cleaned == text and len(cleaned) <= limit:
        return cleaned
    digest = hashlib.sha256(text.encode()).hexdigest()[:_NAME_HASH_LENGTH]
    return f"{cleaned[: limit - _NAME_HASH_LENGTH - 1].rstrip('-')}-{digest}"
