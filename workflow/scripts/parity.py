"""Every framework's study logits against PyTorch's: results/tables/parity.csv (fwbench.scenarios.parity)."""

from pathlib import Path

import numpy as np

from fwbench.io import atomic_write_text, read_json
from fwbench.scenarios.parity import compare
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    records, logits = {}, {}
    for record_path, logits_path in zip(snakemake.input.records, snakemake.input.logits, strict=True):
        framework = Path(record_path).stem
        records[framework] = read_json(record_path)
        with np.load(logits_path) as arrays:
            logits[framework] = {name: arrays[name] for name in arrays.files}
    table = compare(records, logits)
    atomic_write_text(snakemake.output[0], table.to_csv(index=False))
    print(table.to_string())
