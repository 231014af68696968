"""The paper's micro-suite section: from which batch size each framework computes faster than NumPy."""
