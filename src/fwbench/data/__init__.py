"""Datasets: written once by the workflow, read identically by every framework."""
