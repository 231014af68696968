"""The paper's "Deviations and failures" section: every cell of every suite that failed or ran with a workaround from
the fallback ladder, counted by kind, listed, and the largest batch size that fit."""
