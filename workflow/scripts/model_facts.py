from fwbench.models.facts import write_facts
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    write_facts(
        snakemake.wildcards.model,
        num_classes=snakemake.params.num_classes,
        image_size=snakemake.params.image_size,
        out=snakemake.output[0],
    )
