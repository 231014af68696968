"""One suite's cell paths as one file (rule cell_index, fwbench.results.write_cell_index)."""

from fwbench.results import write_cell_index

write_cell_index(snakemake.output[0], snakemake.wildcards.suite, list(snakemake.input))
