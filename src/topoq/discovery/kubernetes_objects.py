"""The parts of Kubernetes objects every importer reads: kinds, lists and pod specs.

A pod spec gives what the scheduler needs of a pod: its effective resource request (counted as
the kubelet and kube-scheduler count it), its node selector, its required node affinity and its
tolerations. Fields the scheduler does not use are ignored.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from enum import StrEnum
from typing import NamedTuple, TypeVar

from topoq.discovery.documents import Fields, argv
from topoq.domain.errors import InvalidInputError
from topoq.domain.gpu_share import per_pod_gpu_ask
from topoq.domain.launch import check_image
from topoq.domain.names import check_job_id, check_label_name, check_subdomain_name
from topoq.domain.node import TaintEffect
from topoq.domain.quantity import NVIDIA_GPU
from topoq.domain.resources import Resources
from topoq.domain.workload import (
    NodeSelectorTerm,
    SelectorOperator,
    SelectorRequirement,
    Toleration,
    TolerationOperator,
)

LIST_KIND = "List"
DEFAULT_NAMESPACE = "default"
SIDECAR_RESTART_POLICY = "Always"
_DEFAULT_RESOURCE_PREFIXES = ("kubernetes.io/", "requests.")
_Enum = TypeVar("_Enum", bound=StrEnum)


def require_kind(fields: Fields, kinds: Collection[str], api_versions: Collection[str] = ()) -> str:
    """The object's kind, checked against ``kinds`` (and ``apiVersion`` when versions are given)."""
    kind = fields.text("kind", "")
    expected = " or ".join(sorted(kinds))
    if kind not in kinds:
        got = repr(kind) if kind else "no kind"
        raise InvalidInputError(
            f"expected kind {expected}, got {got}",
            where=fields.path("kind"),
            hint=f"give a {expected} object" + _versions_hint(api_versions),
        )
    if api_versions:
        version = fields.text("apiVersion", "")
        if version not in api_versions:
            raise InvalidInputError(
                f"{kind} apiVersion {version or 'missing'!r} is not supported",
                where=fields.path("apiVersion"),
                hint=f"use {' or '.join(sorted(api_versions))}",
            )
    return kind


def _versions_hint(api_versions: Collection[str]) -> str:
    return f" (apiVersion {' or '.join(sorted(api_versions))})" if api_versions else ""


def workload_name(fields: Fields, key: str) -> str:
    """A workload's name (it becomes the job's id): a DNS-1123 subdomain, as in Kubernetes."""
    return check_job_id(fields.text(key), where=fields.path(key))


def optional_name(fields: Fields, key: str, what: str) -> str | None:
    """A queue or priority class name, when given: a DNS-1123 subdomain, as in Kubernetes."""
    value = fields.optional_text(key)
    return None if value is None else check_subdomain_name(value, what=what, where=fields.path(key))


def namespace_name(fields: Fields, key: str, default: str) -> str:
    """A namespace (it names the team): a DNS-1123 label, as in Kubernetes."""
    return check_label_name(fields.text(key, default), what="namespace", where=fields.path(key))


def optional_image(fields: Fields, key: str) -> str | None:
    """A container image, when given (``domain.launch.check_image``: not empty, no spaces)."""
    image = fields.optional_text(key)
    if image is not None:
        check_image(image, where=fields.path(key))
    return image


def pod_set_name(fields: Fields, key: str, default: str | None = None) -> str:
    """A pod set's name: a DNS-1123 label, as Kueue's pod set names are."""
    return check_label_name(fields.text(key, default), what="pod set name", where=fields.path(key))


def object_items(fields: Fields, item_kind: str, list_kind: str) -> list[Fields]:
    """The objects of a ``<Kind>List``, a generic ``List``, or a single object of ``item_kind``."""
    kind = require_kind(fields, {item_kind, list_kind, LIST_KIND})
    if kind == item_kind:
        return [fields]
    items = fields.records("items")
    for item in items:
        if item.has("kind"):
            require_kind(item, {item_kind})
    return items


def resource_amounts(fields: Fields) -> Resources:
    """A ResourceList such as ``{"cpu": "500m", "memory": "16Gi"}``; errors name the resource."""
    return Resources.parse(fields.data, where=fields.where)


def requests_with_gpu_shares(fields: Fields) -> Resources:
    """What one pod (or container) asks for: a ResourceList in which ``nvidia.com/gpu`` may
    also be a share of one GPU (``0.5``, ``500m``), kept as ``topoq.io/gpu-milli``."""
    gpu = fields.data.get(NVIDIA_GPU) if isinstance(fields.data, Mapping) else None
    if gpu is None or isinstance(gpu, bool) or not isinstance(gpu, str | int | float):
        return resource_amounts(fields)
    where = f"{fields.where}.{NVIDIA_GPU}" if fields.where else NVIDIA_GPU
    name, amount = per_pod_gpu_ask(gpu, where)
    others = {key: value for key, value in fields.data.items() if key != NVIDIA_GPU}
    return Resources.parse(others, where=fields.where) + Resources({name: amount})


def larger_of(first: Resources, second: Resources) -> Resources:
    """Per resource, the larger amount of the two."""
    names = set(first) | set(second)
    return Resources({name: max(first.amount(name), second.amount(name)) for name in names})


def pod_requests(pod_spec: Fields) -> Resources:
    """The effective request of one pod, as Kubernetes counts it.

    Per resource: the larger of (the sum over ``containers`` plus sidecars) and the largest
    request of an init container (plus the sidecars started before it); then ``overhead`` on top.
    Sidecars are init containers with ``restartPolicy: Always``; they keep running.
    """
    containers = Resources()
    for container in pod_spec.records("containers"):
        containers = containers + _container_requests(container)
    sidecars, init_peak = Resources(), Resources()
    for init in pod_spec.records("initContainers"):
        requests = _container_requests(init)
        if init.text("restartPolicy", "") == SIDECAR_RESTART_POLICY:
            sidecars = sidecars + requests
        else:
            init_peak = larger_of(init_peak, requests + sidecars)
    effective = larger_of(containers + sidecars, init_peak)
    return effective + resource_amounts(pod_spec.mapping("overhead"))


def _container_requests(container: Fields) -> Resources:
    """The container's requests; a resource with a limit and no request requests its limit,
    as the API server defaults it."""
    resources = container.mapping("resources")
    requests = requests_with_gpu_shares(resources.mapping("requests"))
    limits = requests_with_gpu_shares(resources.mapping("limits"))
    return requests + Resources({k: v for k, v in limits.items() if k not in requests})


def tolerations(pod_spec: Fields) -> tuple[Toleration, ...]:
    return tuple(toleration(record) for record in pod_spec.records("tolerations"))


def toleration(fields: Fields) -> Toleration:
    """One toleration; an empty ``effect`` tolerates every effect."""
    operator_text = fields.text("operator", TolerationOperator.EQUAL.value)
    operator = _member(TolerationOperator, operator_text, fields.path("operator"))
    effect = fields.text("effect", "") or None
    if effect is not None:
        _member(TaintEffect, effect, fields.path("effect"))
    key = fields.text("key", "") or None
    if key is None and operator is not TolerationOperator.EXISTS:
        raise InvalidInputError(
            "a toleration without a key must use operator Exists",
            where=fields.where,
            hint="add a key, or set operator: Exists to tolerate every taint",
        )
    return Toleration(key=key, operator=operator, value=fields.text("value", ""), effect=effect)


def taint_effect(fields: Fields) -> TaintEffect:
    return _member(TaintEffect, fields.text("effect"), fields.path("effect"))


def _member(enum: type[_Enum], text: str, where: str) -> _Enum:
    try:
        return enum(text)
    except ValueError:
        allowed = ", ".join(member.value for member in enum)
        raise InvalidInputError(
            f"unknown value {text!r}", where=where, hint=f"use one of {allowed}"
        ) from None


def required_affinity_terms(pod_spec: Fields) -> tuple[NodeSelectorTerm, ...]:
    """``affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`` (terms OR-ed)."""
    selector = (
        pod_spec.mapping("affinity")
        .mapping("nodeAffinity")
        .mapping("requiredDuringSchedulingIgnoredDuringExecution")
    )
    return tuple(_selector_term(term) for term in selector.records("nodeSelectorTerms"))


def _selector_term(term: Fields) -> NodeSelectorTerm:
    if term.items("matchFields"):
        raise InvalidInputError(
            "matchFields is not supported",
            where=term.path("matchFields"),
            hint="select nodes with matchExpressions on labels, e.g. kubernetes.io/hostname",
        )
    expressions = term.records("matchExpressions")
    if not expressions:
        raise InvalidInputError(
            "an empty node selector term matches no node",
            where=term.where,
            hint="add matchExpressions or remove the term",
        )
    return NodeSelectorTerm(tuple(_requirement(expression) for expression in expressions))


def _requirement(expression: Fields) -> SelectorRequirement:
    operator = _member(SelectorOperator, expression.text("operator"), expression.path("operator"))
    values = tuple(
        _label_value(value, f"{expression.path('values')}[{index}]")
        for index, value in enumerate(expression.items("values"))
    )
    needs_values = operator in (SelectorOperator.IN, SelectorOperator.NOT_IN)
    if needs_values and not values:
        raise InvalidInputError(
            f"operator {operator.value} needs values", where=expression.path("values")
        )
    return SelectorRequirement(expression.text("key"), operator, values)


def _label_value(value: object, where: str) -> str:
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidInputError(f"expected a label value, got {value!r}", where=where)
    return str(value)


def is_extended_resource(name: str) -> bool:
    """A resource outside the ``kubernetes.io`` namespace, such as ``nvidia.com/gpu``."""
    return "/" in name and not name.startswith(_DEFAULT_RESOURCE_PREFIXES)


def extended_resource_tolerations(requests: Mapping[str, int]) -> tuple[Toleration, ...]:
    """The tolerations Kubernetes' ExtendedResourceToleration admission plugin adds to a pod.

    EKS enables the plugin: a pod requesting ``nvidia.com/gpu`` tolerates the ``nvidia.com/gpu``
    NoSchedule taint that GPU nodes carry.
    """
    return tuple(
        Toleration(name, TolerationOperator.EXISTS, effect=TaintEffect.NO_SCHEDULE.value)
        for name in sorted(requests)
        if is_extended_resource(name) and requests[name] > 0
    )


class MainContainer(NamedTuple):
    """What the pods of a template run: their first container's."""

    command: tuple[str, ...]
    environment: dict[str, str]
    image: str | None


def main_container(pod_spec: Fields) -> MainContainer:
    """The first container's command + args, its literal environment (``env[].value``;
    values from secrets or fields cannot be resolved here and are left out) and its image."""
    containers = pod_spec.records("containers")
    if not containers:
        return MainContainer((), {}, None)
    main = containers[0]
    environment = {
        item.text("name"): item.text("value", "")
        for item in main.records("env")
        if item.has("name") and not item.has("valueFrom")
    }
    command = argv(main, "command") + argv(main, "args")
    return MainContainer(command, environment, optional_image(main, "image"))
