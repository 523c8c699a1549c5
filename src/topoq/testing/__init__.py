"""Builders for tests, examples and benchmarks: small clusters, pod sets and workloads."""
