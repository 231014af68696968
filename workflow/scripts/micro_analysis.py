from fwbench.analysis.paper.micro_section import micro_section, write_micro_outputs
from fwbench.io import atomic_write_text
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    outputs = dict(snakemake.output.items())
    if snakemake.input.cells:
        write_micro_outputs(
            snakemake.input.cells,
            snakemake.input.reference,
            outputs=outputs,
            multiplicity=snakemake.params.multiplicity,
        )
    else:  # the study has no micro suite: the paper says so in one sentence and quotes no micro macros
        atomic_write_text(outputs["section"], micro_section(None))
        atomic_write_text(outputs["detail"], "% this study has no micro suite: no detail\n")
        atomic_write_text(outputs["macros"], "% this study has no micro suite\n")
