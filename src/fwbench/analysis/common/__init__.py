"""Primitives every section of the analysis shares: reading cells, partner keys and variants, intervals and verdicts,
the moderation of launch variances, LaTeX escaping."""
