"""From cell JSONs to tidy tables, figures, LaTeX tables and the macros the paper's text quotes."""
