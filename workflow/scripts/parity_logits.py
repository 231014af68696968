"""One framework's eval logits of every model on the study's weights in every precision the study times
(fwbench.scenarios.parity): from its own inference cells, the first call of each timed program
(fwbench.scenarios.logits), or, in a study without the inference suite, computed in this job's own process. The
fairness ledger compares them with PyTorch's. PyTorch's job also computes its float64 logits of the same images, the
truth its own float32 error is taken against (fwbench.scenarios.parity.reference_float64)."""

from pathlib import Path

import numpy as np

from fwbench.analysis.common.cells import load_cells
from fwbench.io import atomic_stream, atomic_write_json
from fwbench.scenarios.parity import BASELINE, framework_logits, framework_logits_from_cells, reference_float64
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0], native=True):  # the frameworks' C++ logging too
    if hasattr(snakemake.input, "cells"):
        record, logits = framework_logits_from_cells(
            snakemake.wildcards.framework,
            # checked as every analysis checks them: a truncated or foreign cell is named in one line
            load_cells(snakemake.input.cells),
            image_size=snakemake.params.image_size,
        )
    else:
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
    if snakemake.wildcards.framework == BASELINE and record["images"]:
        reference = reference_float64(
            snakemake.params.models,
            list(snakemake.input.weights),
            Path(snakemake.input.dataset[0]).parent,
            images=record["images"],
            num_classes=snakemake.params.num_classes,
            image_size=snakemake.params.image_size,
            threads=snakemake.threads,
        )
        logits |= reference
        record["float64_reference"] = {"logits": sorted(reference), "device": "cpu"}
    atomic_stream(snakemake.output.logits, lambda handle: np.savez(handle, **logits))
    atomic_write_json(snakemake.output.record, record)
    for precision, part in record["precisions"].items():
        print(precision, {model: entry.get("missing", "ok") for model, entry in part["models"].items()})
