"""Benchmark scenarios, written once against the backend interface."""
