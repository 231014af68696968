from pathlib import Path

from fwbench.data.store import load_split
from fwbench.models.weights import calibration_batches, init_weights
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    images, _ = load_split(Path(snakemake.input.dataset[0]).parent, "train")
    record = init_weights(
        snakemake.wildcards.model,
        num_classes=snakemake.params.num_classes,
        image_size=snakemake.params.image_size,
        seed=snakemake.params.seed,
        out=snakemake.output.weights,
        pretrained=snakemake.input.pretrained or None,
        head_init=snakemake.params.head_init,
        calibration=calibration_batches(images, snakemake.params.calibration_images),
    )
    print(record["description"])
