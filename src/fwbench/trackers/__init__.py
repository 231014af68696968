"""Measurement: latency, memory and the environment a cell ran in."""
