# Config validation and path building. Everything here is plain Python evaluated at parse time, before any job:
# a bad config stops the run with one line naming the key and value.
import sys
from pathlib import Path

from fwbench import HARNESS_VERSION
from fwbench.config import ConfigError, load_schema, validate_config
from fwbench.data.store import dataset_files
from fwbench.grid import WILDCARD_PATTERNS, cell_paths

try:
    config = validate_config(
        config, load_schema(workflow.source_path("../schemas/config.schema.yaml"))
    )
except ConfigError as error:
    sys.exit(f"fwbench: {error}")

RESULTS = "results"
DATA_DIR = f"{RESULTS}/data"
DATASET_FILES = dataset_files(DATA_DIR)
PAPER_PDF = f"{RESULTS}/report/paper.pdf"
REPO_ROOT = Path(workflow.basedir).parent
ENV = "../../envs/fwbench.yaml"


wildcard_constraints:
    framework=WILDCARD_PATTERNS["framework"],
    model=WILDCARD_PATTERNS["model"],
    precision=WILDCARD_PATTERNS["precision"],
    batch=WILDCARD_PATTERNS["batch"],


def inference_cells():
    return cell_paths(config, RESULTS, suite="inference")


def measurement_settings(suite):
    """What a cell measures under, minus the grid axis itself: adding a batch size must not rerun other cells."""
    return {k: v for k, v in config[suite].items() if k != "batch_sizes"}
