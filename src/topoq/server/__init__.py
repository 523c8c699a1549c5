"""``topoq server``: ``run.serve`` is what it runs — two kinds of process sharing the store.

- **The controller process** (the one you start): it prepares the store, runs the controller
  loop (executor events, scheduling cycle, commit, dispatch) and owns the executor and its
  pods. It binds the API's listening socket and starts the API process(es) on it.
- **API processes** (``--api-workers``, default 1): uvicorn serving the REST API. They only
  read and write the store (see ``topoq.engine.intake``) and wake the controller through a
  pipe; a scheduling step over a long queue never stalls a request (docs/adr/0004).

On first start the store gets the cluster's nodes (from ``cluster_file``, else the example
cluster) and an admin token, written to ``data_dir/admin-token`` (mode 0600). A later start
on a ``cluster_file`` applies its difference to the stored nodes, as ``topoq cluster apply``
does (``api.service.apply_inventory``), logged; one that would remove or shrink a node under a
gang the store says runs refuses to start, nothing changed (without ``cluster_file`` the
stored nodes stay). A policy file, when given and different from the stored policy, becomes a
new policy version — unless the policy lint finds an error in it on the inventory: then the
start is refused. The lint's findings about the policy in force are logged. After a
restart, the gangs the store says hold capacity are adopted where their pods still run (the
local executor's outlive a crash, and a clean stop with ``keep_pods_on_exit``; a Kubernetes
cluster's always): they keep their pods and attempt and end as their pods do. Only a gang that
lost a pod while no server watched is requeued (``Controller.recover``). An API process
dies with the controller process (Linux parent-death signal); one that dies alone is replaced
by a warmed spare (``topoq.api_workers``). The data directory is private to the server's user
and the database URL stays off command lines (``topoq.server_environment``).

Its modules: ``settings`` (one frozen settings object; every option, on every command line, is
made from its fields), ``build`` (the controller process's parts), ``loop`` (its steps and
garbage collections), ``api_process`` (one API process) and ``run`` (start, serve, stop).
"""
