"""The Kubernetes executor (``topoq server --executor kubernetes --kubeconfig PATH``): each pod
of an admitted gang is a Pod bound to its placed node; nodes and their free room come from
the API server (docs/executors.md). Its plugin record is ``plugin.KUBERNETES_PLUGIN``; the
official ``kubernetes`` client is imported only when the executor is made."""
