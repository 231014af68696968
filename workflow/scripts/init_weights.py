from fwbench.models.weights import init_weights
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    record = init_weights(
        snakemake.wildcards.model,
        num_classes=snakemake.params.num_classes,
        image_size=snakemake.params.image_size,
        seed=snakemake.params.seed,
        out=snakemake.output.weights,
        pretrained=snakemake.input.pretrained or None,
        head_init=snakemake.params.head_init,
    )
    print(record["description"])
