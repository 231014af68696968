from fwbench.analysis.training.epochs import write_training_tables
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    write_training_tables(snakemake.input.cells, snakemake.output.epochs, snakemake.output.step0)
