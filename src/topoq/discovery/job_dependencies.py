"""The jobs a job document says it depends on, in each of the three job formats.

==================  ====================================================================
topoq job file      ``spec.afterOk``, ``spec.afterAny``, ``spec.afterFailed`` (or snake_case)
HyperPod job        ``after_ok``, ``after_any``, ``after_failed``
Kueue Workload      annotations ``topoq.io/after-ok``, ``topoq.io/after-any``,
                    ``topoq.io/after-failed`` on the Workload's ``metadata.annotations``
==================  ====================================================================

Each value is a list of job ids or one string of comma-separated ids (an annotation can only be
the string). Every id follows the job id grammar; whether a job has it is checked at
submission, against the store. A misspelt key gets the usual "did you mean" (the job file
rejects unknown keys; here, for HyperPod keys and ``topoq.io/`` annotations that start like a
dependency key), and a dependency annotation on a pod template, where it would do nothing, is
refused with where it belongs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from topoq.discovery.documents import Fields, unknown_key
from topoq.discovery.own_format_fields import spelling
from topoq.domain.errors import InvalidInputError
from topoq.domain.job import Dependency, DependencyKind, JobId
from topoq.domain.names import check_job_id

JOB_FILE_DEPENDENCY_KEYS: Mapping[str, DependencyKind] = {
    "afterOk": DependencyKind.AFTER_OK,
    "afterAny": DependencyKind.AFTER_ANY,
    "afterFailed": DependencyKind.AFTER_FAILED,
}
"""Keys of a topoq job file's ``spec`` (snake_case accepted as well)."""
HYPERPOD_DEPENDENCY_KEYS: Mapping[str, DependencyKind] = {
    "after_ok": DependencyKind.AFTER_OK,
    "after_any": DependencyKind.AFTER_ANY,
    "after_failed": DependencyKind.AFTER_FAILED,
}
DEPENDENCY_ANNOTATION_PREFIX = "topoq.io/after"
KUEUE_DEPENDENCY_ANNOTATIONS: Mapping[str, DependencyKind] = {
    f"topoq.io/{kind.value}": kind for kind in DependencyKind
}
"""``topoq.io/after-ok`` and so on, on a Workload's ``metadata.annotations``."""
_IDS_HINT = "give job ids as a list, or as one string of ids separated by commas"


@dataclass(frozen=True)
class WrittenDependency:
    """A dependency and where the document names its upstream id (``spec.afterOk[0]``)."""

    dependency: Dependency
    where: str


def dependencies_from_job_file(doc: object, *, source: str) -> tuple[WrittenDependency, ...]:
    """The dependencies a topoq job file's ``spec`` names."""
    try:
        spec = Fields(doc, "").mapping("spec")
        return _all_named(spec, {spelling(spec, k): v for k, v in JOB_FILE_DEPENDENCY_KEYS.items()})
    except InvalidInputError as error:
        raise error.located(source) from None


def dependencies_from_hyperpod_job(doc: object, *, source: str) -> tuple[WrittenDependency, ...]:
    """The dependencies a HyperPod job's ``after_*`` fields name."""
    try:
        fields = Fields(doc, "")
        _reject_near_misses(fields, HYPERPOD_DEPENDENCY_KEYS, prefix="after")
        return _all_named(fields, HYPERPOD_DEPENDENCY_KEYS)
    except InvalidInputError as error:
        raise error.located(source) from None


def dependencies_from_kueue(doc: object, *, source: str) -> tuple[WrittenDependency, ...]:
    """The dependencies a Kueue Workload's ``topoq.io/after-*`` annotations name."""
    try:
        fields = Fields(doc, "")
        annotations = fields.mapping("metadata").mapping("annotations")
        _reject_near_misses(annotations, KUEUE_DEPENDENCY_ANNOTATIONS, DEPENDENCY_ANNOTATION_PREFIX)
        _reject_on_pod_templates(fields)
        return _all_named(annotations, KUEUE_DEPENDENCY_ANNOTATIONS)
    except InvalidInputError as error:
        raise error.located(source) from None


def _all_named(fields: Fields, keys: Mapping[str, DependencyKind]) -> tuple[WrittenDependency, ...]:
    found: list[WrittenDependency] = []
    for key, kind in keys.items():
        if fields.has(key):
            found.extend(
                WrittenDependency(Dependency(kind, JobId(job)), where)
                for job, where in _ids(fields, key)
            )
    return tuple(found)


def _ids(fields: Fields, key: str) -> list[tuple[str, str]]:
    """Each id the field names, with where it is written."""
    value, path = fields.raw(key), fields.path(key)
    if isinstance(value, str):
        parts = [part.strip() for part in value.split(",")]
        if not any(parts) or not all(parts):
            raise InvalidInputError(
                f"{value!r:.80} has an empty job id",
                where=path,
                hint=f"{_IDS_HINT}, e.g. prep,eval",
            )
        return [(check_job_id(part, where=path), path) for part in parts]
    if not isinstance(value, list):
        raise InvalidInputError(
            f"expected job ids, got {type(value).__name__} {value!r:.60}",
            where=path,
            hint=_IDS_HINT,
        )
    return [
        (check_job_id(item, where=f"{path}[{index}]"), f"{path}[{index}]")
        for index, item in enumerate(value)
    ]


def _reject_near_misses(fields: Fields, known: Mapping[str, DependencyKind], prefix: str) -> None:
    """A key that starts like a dependency key but is none (``after_okk``, ``afterOk``)."""
    for key in fields.data:
        name = str(key)
        if name.lower().startswith(prefix) and name not in known:
            raise unknown_key(
                name,
                list(known),
                where=fields.path(name),
                listed=list(known),
                what="dependency key",
                cutoff=0.5,
            )


def _reject_on_pod_templates(fields: Fields) -> None:
    for record in fields.mapping("spec").records("podSets"):
        template = Fields(record.raw("template", {}), record.path("template"))
        annotations = template.mapping("metadata").mapping("annotations")
        for key in annotations.data:
            if str(key).startswith(DEPENDENCY_ANNOTATION_PREFIX):
                raise InvalidInputError(
                    f"annotation {key!r} is on a pod template",
                    where=annotations.path(str(key)),
                    hint="a job's dependencies go on the Workload's own metadata.annotations",
                )


def no_dependencies(doc: object, *, source: str) -> tuple[WrittenDependency, ...]:
    """A Kubernetes manifest names none: give them with the submission."""
    return ()
