"""Kueue ``Workload`` objects, with the topology requests written on their pod templates.

A pod set's topology request comes from its pod template's Kueue annotations when any is set,
otherwise from ``spec.podSets[].topologyRequest`` (which Kueue fills in from the same
annotations). Two extensions go beyond Kueue: a pod set may set a required and a preferred level
together, and the ``topoq.io/podset-spread-*`` annotations cap the pods per domain of a level.
"""

from __future__ import annotations

from dataclasses import dataclass

from topoq.discovery.documents import Fields, parse_json_text
from topoq.discovery.kubernetes_objects import (
    DEFAULT_NAMESPACE,
    main_container,
    namespace_name,
    optional_name,
    pod_requests,
    pod_set_name,
    require_kind,
    required_affinity_terms,
    tolerations,
    workload_name,
)
from topoq.discovery.own_format_fields import bounded
from topoq.domain.durations import MAX_DURATION_S
from topoq.domain.errors import InvalidInputError
from topoq.domain.workload import (
    PodSetSpec,
    SliceConstraint,
    SpreadConstraint,
    TopologyRequest,
    WorkloadSpec,
)

WORKLOAD_KIND = "Workload"
KUEUE_WORKLOAD_API_VERSIONS = frozenset({"kueue.x-k8s.io/v1beta1", "kueue.x-k8s.io/v1beta2"})
DEFAULT_POD_SET_NAME = "main"  # Kueue's default for spec.podSets[].name

REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-required-topology"
PREFERRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-preferred-topology"
UNCONSTRAINED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-unconstrained-topology"
SLICE_REQUIRED_TOPOLOGY_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology"
SLICE_SIZE_ANNOTATION = "kueue.x-k8s.io/podset-slice-size"
SLICE_CONSTRAINTS_ANNOTATION = "kueue.x-k8s.io/podset-slice-required-topology-constraints"
GROUP_NAME_ANNOTATION = "kueue.x-k8s.io/podset-group-name"
SPREAD_TOPOLOGY_ANNOTATION = "topoq.io/podset-spread-topology"
SPREAD_MAX_PODS_ANNOTATION = "topoq.io/podset-spread-max-pods-per-domain"

KUEUE_TOPOLOGY_ANNOTATIONS = (
    REQUIRED_TOPOLOGY_ANNOTATION,
    PREFERRED_TOPOLOGY_ANNOTATION,
    UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    SLICE_CONSTRAINTS_ANNOTATION,
    GROUP_NAME_ANNOTATION,
)
_CONSTRAINTS_HINT = 'write a JSON list, outermost first: [{"topology": "<node label>", "size": 8}]'


@dataclass(frozen=True)
class _TopologyKeys:
    """Where one source (pod annotations or a ``topologyRequest``) keeps each topology field."""

    required: str
    preferred: str
    unconstrained: str
    slice_level: str
    slice_size: str
    slice_constraints: tuple[str, ...]
    group: str


_ANNOTATION_KEYS = _TopologyKeys(
    REQUIRED_TOPOLOGY_ANNOTATION,
    PREFERRED_TOPOLOGY_ANNOTATION,
    UNCONSTRAINED_TOPOLOGY_ANNOTATION,
    SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    SLICE_SIZE_ANNOTATION,
    (SLICE_CONSTRAINTS_ANNOTATION,),
    GROUP_NAME_ANNOTATION,
)
_REQUEST_KEYS = _TopologyKeys(
    "required",
    "preferred",
    "unconstrained",
    "podSetSliceRequiredTopology",
    "podSetSliceSize",
    # Kueue's JSON name is "podsetSlice…"; the "podSetSlice…" spelling is accepted as well.
    ("podsetSliceRequiredTopologyConstraints", "podSetSliceRequiredTopologyConstraints"),
    "podSetGroupName",
)


def workload_from_kueue(doc: object, *, source: str) -> WorkloadSpec:
    """A Kueue ``Workload`` (v1beta1 or v1beta2): its pod sets, queue and priority class."""
    try:
        return _workload(Fields(doc, ""))
    except InvalidInputError as error:
        raise error.located(source) from None


def _workload(fields: Fields) -> WorkloadSpec:
    require_kind(fields, {WORKLOAD_KIND}, KUEUE_WORKLOAD_API_VERSIONS)
    metadata, spec = fields.mapping("metadata"), fields.mapping("spec")
    name = workload_name(metadata, "name")
    namespace = namespace_name(metadata, "namespace", DEFAULT_NAMESPACE)
    queue, priority_class = optional_name(spec, "queueName", "queue name"), _priority_class(spec)
    pod_sets = tuple(_pod_set(record) for record in spec.records("podSets"))
    time_limit = _maximum_execution_time(spec)
    try:
        return WorkloadSpec(name, pod_sets, namespace, queue, priority_class, time_limit)
    except InvalidInputError as error:
        raise error.located(spec.path("podSets")) from None


def _maximum_execution_time(spec: Fields) -> float | None:
    """Kueue's ``spec.maximumExecutionTimeSeconds`` (whole seconds, at least 1): the job's time
    limit, as ``timeLimit`` is in a topoq job file."""
    key = "maximumExecutionTimeSeconds"
    if not spec.has(key):
        return None
    return float(bounded(spec, key, 1, MAX_DURATION_S))


def _priority_class(spec: Fields) -> str | None:
    """v1beta1 names it in ``priorityClassName``; v1beta2 in ``priorityClassRef.name``."""
    what = "priority class name"
    return optional_name(spec, "priorityClassName", what) or optional_name(
        spec.mapping("priorityClassRef"), "name", what
    )


def _pod_set(record: Fields) -> PodSetSpec:
    template = Fields(record.required("template"), record.path("template"))
    pod_spec = template.mapping("spec")
    annotations = template.mapping("metadata").mapping("annotations")
    name, count = pod_set_name(record, "name", DEFAULT_POD_SET_NAME), record.integer("count")
    requests, selector = pod_requests(pod_spec), pod_spec.string_map("nodeSelector")
    affinity, tolerated = required_affinity_terms(pod_spec), tolerations(pod_spec)
    topology = pod_set_topology(annotations, record.mapping("topologyRequest"))
    command, environment, image = main_container(pod_spec)
    try:
        return PodSetSpec(
            name,
            count,
            requests,
            selector,
            affinity,
            tolerated,
            topology,
            command,
            environment,
            image,
        )
    except InvalidInputError as error:
        raise error.located(record.where) from None


def pod_set_topology(annotations: Fields, topology_request: Fields) -> TopologyRequest:
    """The topology request of one pod set, from its pod annotations or its topologyRequest."""
    uses_annotations = any(annotations.has(key) for key in KUEUE_TOPOLOGY_ANNOTATIONS)
    source, keys = (
        (annotations, _ANNOTATION_KEYS) if uses_annotations else (topology_request, _REQUEST_KEYS)
    )
    required, preferred = _levels(source, keys)
    return TopologyRequest(
        required=required,
        preferred=preferred,
        slices=_slices(source, keys),
        group=source.optional_text(keys.group) or None,
        spread=_spread(annotations),
    )


def _levels(source: Fields, keys: _TopologyKeys) -> tuple[str | None, str | None]:
    required = _optional_label(source, keys.required)
    preferred = _optional_label(source, keys.preferred)
    if source.boolean(keys.unconstrained) and (required or preferred):
        raise InvalidInputError(
            "an unconstrained pod set cannot also require or prefer a level",
            where=source.path(keys.unconstrained),
            hint=f"remove {keys.unconstrained}, or remove {keys.required} and {keys.preferred}",
        )
    return required, preferred


def _optional_label(source: Fields, key: str) -> str | None:
    label = source.optional_text(key)
    if label is not None and not label.strip():
        raise InvalidInputError("is empty", where=source.path(key), hint="name a node label")
    return label


def _slices(source: Fields, keys: _TopologyKeys) -> tuple[SliceConstraint, ...]:
    constraints_key = next((key for key in keys.slice_constraints if source.has(key)), None)
    level = _optional_label(source, keys.slice_level)
    has_size = source.has(keys.slice_size)
    if constraints_key is not None:
        if level is not None or has_size:
            raise InvalidInputError(
                f"the slice constraints cannot be combined with {keys.slice_level}",
                where=source.path(constraints_key),
                hint="list every slice layer in the constraints, or use the single-layer pair",
            )
        return slice_layers(source, constraints_key)
    if level is None and has_size:
        raise InvalidInputError(
            f"a slice size is given without {keys.slice_level}",
            where=source.path(keys.slice_size),
            hint=f"add {keys.slice_level} naming the level each slice must share, or remove it",
        )
    if level is not None and not has_size:
        raise InvalidInputError(
            f"a slice level is given without {keys.slice_size}",
            where=source.path(keys.slice_level),
            hint=f"add {keys.slice_size}: the number of pods in each slice",
        )
    if level is None:
        return ()
    return (SliceConstraint(level, source.integer(keys.slice_size)),)


def slice_layers(source: Fields, key: str) -> tuple[SliceConstraint, ...]:
    """Slice layers, outermost first: a JSON string or a list of ``{topology, size}``."""
    raw, where = source.raw(key), source.path(key)
    if isinstance(raw, str):
        try:
            raw = parse_json_text(raw, source=where)
        except InvalidInputError as error:
            raise InvalidInputError(
                error.message, where=error.where, hint=_CONSTRAINTS_HINT
            ) from None
    layers = Fields({key: raw}, source.where).records(key)
    if not layers:
        raise InvalidInputError("lists no slice layers", where=where, hint=_CONSTRAINTS_HINT)
    return tuple(SliceConstraint(layer.text("topology"), layer.integer("size")) for layer in layers)


def _spread(annotations: Fields) -> SpreadConstraint | None:
    level = _optional_label(annotations, SPREAD_TOPOLOGY_ANNOTATION)
    has_maximum = annotations.has(SPREAD_MAX_PODS_ANNOTATION)
    if level is None and not has_maximum:
        return None
    if level is None:
        raise InvalidInputError(
            f"a spread maximum is given without {SPREAD_TOPOLOGY_ANNOTATION}",
            where=annotations.path(SPREAD_MAX_PODS_ANNOTATION),
            hint="add the level whose domains the pods spread over",
        )
    if not has_maximum:
        raise InvalidInputError(
            f"a spread level is given without {SPREAD_MAX_PODS_ANNOTATION}",
            where=annotations.path(SPREAD_TOPOLOGY_ANNOTATION),
            hint='add the most pods allowed in one domain, e.g. "2"',
        )
    return SpreadConstraint(level, annotations.integer(SPREAD_MAX_PODS_ANNOTATION))
