"""The paper's micro-suite section: from which batch size does each framework compute faster than plain NumPy?

A reference study (an NVIDIA T4) timed a matrix product and a small network at batch sizes 1 to 4096 for NumPy,
PyTorch and JAX and read conclusions off the batch size at which each framework overtakes NumPy. Here the same
question is answered from the micro cells (`results/cells/micro/...`), one module per step, each importing only
those above it in this list:

- `vocabulary`: the words every step shares (the baseline, the variants, where an interval comes from, the verdicts)
  and how a series (a framework in one execution mode) is named;
- `cells`: reading and checking the cell results;
- `frame`: the tidy table, one row per cell and timing variant;
- `speedups`: the speedup over NumPy with its 95% interval over processes (paired by round), per batch size;
- `crossovers`: the crossover batch size from the point estimates, its interval from resampling the whole series,
  and what the intervals show;
- `reference`: the published reference and the comparison of its crossovers with ours;
- `figure`, `tables`, `text`, `analysis`, `macros`, `section`: the figure, the LaTeX tables, every table derived
  once, the macros and the section's floats;
- `findings`, `details`: the values the section's templates word (report/templates/micro.tex.j2 for the body,
  micro_detail.tex.j2 for the appendix), rendered by fwbench.analysis.paper.micro_section;
- `outputs`: `write_micro_tables`, the files below the paper (fwbench.analysis.paper.micro_section
  .write_micro_outputs is the entry point the workflow calls).

Nothing in the section is typed by hand: every number and every comparison word comes from the data, and every
sentence from a template.
"""
