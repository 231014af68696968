"""The paper's fairness section: the ledger of every control the study claims, and the block design's checks."""
