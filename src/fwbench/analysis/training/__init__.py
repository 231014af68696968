"""The paper's training section: per-epoch tables, step-0 agreement, curves, and the reference figures."""
