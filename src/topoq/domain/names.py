"""The one grammar for names that become paths, processes, labels and audit actors.

Job ids, team names and API token names follow Kubernetes' DNS-1123 rules, as HyperPod job
names and namespaces do: lowercase letters, digits and ``-`` (and ``.`` between labels in a
subdomain), starting and ending with a letter or digit. Such a name can never be ``.`` or
``..``, hold a ``/``, a NUL or a space, or collide with another name when it names a folder.
"""

from __future__ import annotations

import re

from topoq.domain.errors import InvalidInputError

DNS_LABEL_MAX = 63
DNS_SUBDOMAIN_MAX = 253
_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_LABEL = re.compile(_LABEL)
_DNS_SUBDOMAIN = re.compile(rf"{_LABEL}(?:\.{_LABEL})*")
_LABEL_VALUE = re.compile(r"[A-Za-z0-9](?:[-_.A-Za-z0-9]*[A-Za-z0-9])?")

JOB_ID_RULE = (
    "a job id is 1 to 253 lowercase letters, digits, '-' and '.', starting and ending with a "
    "letter or digit: a Kubernetes DNS-1123 subdomain, e.g. llama-pretrain-7"
)
LABEL_RULE = (
    "1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit: "
    "a Kubernetes DNS-1123 label, e.g. nlp-research"
)

SUBDOMAIN_RULE = (
    "1 to 253 lowercase letters, digits, '-' and '.', starting and ending with a letter or "
    "digit: a Kubernetes DNS-1123 subdomain, e.g. training-priority"
)
LABEL_VALUE_RULE = (
    "1 to 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit: "
    "a Kubernetes label value, e.g. p5.48xlarge"
)


def is_dns_label(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= DNS_LABEL_MAX
        and _DNS_LABEL.fullmatch(value) is not None
    )


def is_dns_subdomain(value: object) -> bool:
    return (
        isinstance(value, str)
        and len(value) <= DNS_SUBDOMAIN_MAX
        and _DNS_SUBDOMAIN.fullmatch(value) is not None
    )


def check_job_id(value: object, *, where: str) -> str:
    """``value`` if it is a valid job id; else an error naming ``where`` and the rule."""
    if is_dns_subdomain(value):
        return str(value)
    raise InvalidInputError(f"{_shown(value)} is not a valid job id", where=where, hint=JOB_ID_RULE)


def check_label_name(value: object, *, what: str, where: str) -> str:
    """``value`` if it is a DNS-1123 label (team and token names); ``what`` names the kind."""
    if is_dns_label(value):
        return str(value)
    raise InvalidInputError(
        f"{_shown(value)} is not a valid {what}", where=where, hint=f"a {what} is {LABEL_RULE}"
    )


def check_subdomain_name(value: object, *, what: str, where: str) -> str:
    """``value`` if it is a DNS-1123 subdomain (priority class names, as Kubernetes')."""
    if is_dns_subdomain(value):
        return str(value)
    raise InvalidInputError(
        f"{_shown(value)} is not a valid {what}", where=where, hint=f"a {what} is {SUBDOMAIN_RULE}"
    )


def check_label_value(value: object, *, what: str, where: str) -> str:
    """``value`` if it can be a Kubernetes label value (flavors name instance-type labels)."""
    if isinstance(value, str) and len(value) <= DNS_LABEL_MAX and _LABEL_VALUE.fullmatch(value):
        return value
    raise InvalidInputError(
        f"{_shown(value)} is not a valid {what}",
        where=where,
        hint=f"a {what} is {LABEL_VALUE_RULE}",
    )


def _shown(value: object, limit: int = 60) -> str:
    """The value for a message: quoted, control characters escaped, cut when long."""
    text = repr(value)
    return (
        text
        if len(text) <= limit
        else f"{text[: limit - 5]}…{text[-4:]} ({len(str(value))} characters)"
    )
