"""The paper's reproducibility section: where the study's wall time went."""
