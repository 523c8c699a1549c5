"""Which of the policy's priority classes a job's written class name means.

SageMaker HyperPod task governance names the Kueue WorkloadPriorityClass of each of its classes
``<class>-priority`` (``training-priority``, ``inference-priority``), and jobs written for it
carry that name: in ``kueue.x-k8s.io/priority-class``, a Workload's ``priorityClassName`` or the
HyperPod CLI's ``priority``. A topoq policy names the class itself (``training``). So a written
name is the policy's class of that name when there is one, else — for a name with the
``-priority`` suffix — the class without the suffix. Submission charges a job to that class, and
``topoq policy lint`` reports a typical gang's class by the same rule.
"""

from __future__ import annotations

from topoq.domain.governance import ClusterPolicy

HYPERPOD_CLASS_SUFFIX = "-priority"


def policy_class_of(name: str, policy: ClusterPolicy) -> str | None:
    """The name of the policy's class that ``name`` means, or None when it means none:
    ``name`` itself when the policy defines it, else ``name`` without ``-priority`` when the
    policy defines that (``training-priority`` → ``training``)."""
    if name in policy.weight_of_class:
        return name
    bare = name.removesuffix(HYPERPOD_CLASS_SUFFIX)
    if bare != name and bare in policy.weight_of_class:
        return bare
    return None
