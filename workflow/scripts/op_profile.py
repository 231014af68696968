"""Where the time goes: the op-profile tables, figure and section (fwbench.analysis.paper.profile_section)."""

from fwbench.analysis.paper.profile_section import write_profile_outputs
from fwbench.results import read_cell_index
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    written = write_profile_outputs(
        read_cell_index(list(snakemake.input.cells)),
        snakemake.input.inference,
        snakemake.input.speedups,
        dict(snakemake.output.items()),
    )
    print(written.table.to_string())
