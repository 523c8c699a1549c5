"""Pure data: resources, nodes, topology levels, workloads and placement outcomes. No I/O."""
