"""Defining a study: its configuration and files, the cell grid, execution modes, autotuning, micro operations, rule
params."""
