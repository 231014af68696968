from fwbench.scenarios.operations import write_operands
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    record = write_operands(snakemake.output.operands, seed=snakemake.params.seed, **snakemake.params.sizes)
    print(f"operands {record['shapes']} from seed {record['seed']}: sha256 {record['weights_sha256']}")
