import sys

from fwbench.running.devices import DeviceCheckError, check
from fwbench.workflow.logs import redirect_to

try:
    with redirect_to(snakemake.log[0]):
        record = check(
            snakemake.params.frameworks,
            snakemake.params.device,
            int(snakemake.resources.gpu_slots),
            snakemake.output[0],
        )
        print(record)
except DeviceCheckError as error:
    # The one line the user needs, on the terminal (the log has the same line after the traceback).
    sys.exit(f"fwbench: {error}")
