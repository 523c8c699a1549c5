"""Real outside systems brought up on this machine for tests, demos and benchmarks: a
Kubernetes control plane (``testbeds.kubernetes``). Each starts real programs as ordinary
processes on the loopback, records their PIDs and stops exactly those."""
