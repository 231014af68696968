"""The paper's inference section: the ratio tables (speedups, mode gains), their tables, figures and macros."""
