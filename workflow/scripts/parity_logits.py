"""One framework's eval logits of every model on the study's weights in every precision the study times
(fwbench.scenarios.parity), in this job's own process: the fairness ledger compares them with PyTorch's."""

from pathlib import Path

import numpy as np

from fwbench.io import atomic_stream, atomic_write_json
from fwbench.scenarios.parity import framework_logits
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0], native=True):  # the frameworks' C++ logging too
    record, logits = framework_logits(
        snakemake.wildcards.framework,
        snakemake.params.models,
        list(snakemake.input.weights),
        Path(snakemake.input.dataset[0]).parent,
        num_classes=snakemake.params.num_classes,
        image_size=snakemake.params.image_size,
        threads=snakemake.threads,
        precisions=snakemake.params.precisions,
    )
    atomic_stream(snakemake.output.logits, lambda handle: np.savez(handle, **logits))
    atomic_write_json(snakemake.output.record, record)
    for precision, part in record["precisions"].items():
        print(precision, {model: entry.get("missing", "ok") for model, entry in part["models"].items()})
