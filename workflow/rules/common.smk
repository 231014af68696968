# Config validation and path building. Everything here is plain Python evaluated at parse time, before any job:
# a bad config stops the run with one line naming the key and value.
import sys
from pathlib import Path

from fwbench import HARNESS_VERSION
from fwbench.workflow import cluster
from fwbench.workflow import requirements
from fwbench.study import files as study_files
from fwbench.study.config import ConfigError, load_schema
from fwbench.data import hub
from fwbench.data.store import dataset_files
from fwbench.running.devices import software_fingerprint
from fwbench.study.grid import (
    WILDCARD_PATTERNS,
    cell_paths,
    comparison_rules,
    group_variants,
    suite_batch_sizes,
    suite_frameworks,
    worker_scope,
)
from fwbench.study import params
from fwbench.study.modes import framework_modes
from fwbench.study.params import canonical

try:
    STUDY = study_files.resolve(
        workflow.config_settings.configfiles,
        study_files.snakemake_overrides(workflow.config_settings.config),
        load_schema(workflow.source_path("../schemas/config.schema.yaml")),
    )
except ConfigError as error:
    sys.exit(f"fwbench: {error}")
config = STUDY.config
for note in STUDY.notes:
    print(f"fwbench: note: {note}", file=sys.stderr)

RESULTS = "results"
# A framework that cells still to be measured need, and this environment lacks, stops the study here with one line
# naming the extra that installs it; results restored from another machine (fwbench restore) are never completed
# here (fwbench.workflow.requirements).
RESTORED = requirements.stop_if_refused(config, RESULTS)
DATA_DIR = f"{RESULTS}/data"
DATASET_FILES = dataset_files(DATA_DIR)
RESOURCES = "resources"
# Only a Hub dataset is downloaded; a local save_to_disk directory or image folder is read where it is.
DOWNLOAD_RECORD = (
    str(hub.cache_dir(config["dataset"], RESOURCES) / "download.json")
    if config["dataset"]["source"] == "huggingface"
    and not hub.is_saved_to_disk(config["dataset"]["name"])
    else None
)
# The loader is measured at every batch size a training cell would use it with.
LOADER_BATCH_SIZES = canonical(sorted(set(config["training"]["batch_sizes"])))
PAPER_PDF = f"{RESULTS}/report/paper.pdf"
DEVICE_RECORD = f"{RESULTS}/device.json"
# Paths shared by producing and consuming rules. Consumers name them rather than rules.X.output: a rule whose input
# mixes rules.X references with the whole cell list makes Snakemake hash that list once per cell while building the
# DAG (quadratic: 14 s of a 5,040-cell dry run).
PEAK_RECORD = f"{RESULTS}/probe/peak.json"
FACTS = f"{RESULTS}/facts/{{model}}.json"
WEIGHTS = f"{RESULTS}/weights/{{model}}.npz"
WEIGHTS_PROVENANCE = f"{RESULTS}/weights/{{model}}.json"
PREPROCESS_RECORD = f"{DATA_DIR}/preprocess.json"
PUBLISHED_SECTION = f"{RESULTS}/tables/published_section.tex"
CONCLUSIONS_SECTION = f"{RESULTS}/tables/conclusions.tex"
LEDGER_SECTION = f"{RESULTS}/tables/ledger_section.tex"
PROFILE_SECTION = f"{RESULTS}/tables/profile_section.tex"
LOADER_RECORD = f"{RESULTS}/loader/throughput.json"
INFERENCE_CSV = f"{RESULTS}/tables/inference.csv"
PROFILE_CSV = f"{RESULTS}/tables/op_profile.csv"
SPEEDUPS_CSV = f"{RESULTS}/tables/speedups.csv"
INFERENCE_FIGURE = f"{RESULTS}/figures/inference_throughput.pdf"
LOADER_FIGURE = f"{RESULTS}/figures/loader_throughput.pdf"
PAPER_TABLES = {
    name: f"{RESULTS}/tables/{name}.tex"
    for name in (
        "inference",
        # the ratios a column wide, for the body's results, and the findings that follow them
        # (fwbench.analysis.paper.inference, report/templates/inference_results.tex.j2)
        "ratios",
        "inference_results",
        "failures",
        "environment",
        "macros",
        "models",
        "dataset",
        "loader",
    )
} | {
    # the training section's text and figure (the body) and its tables (an appendix): fwbench.analysis.common.detail
    "training": f"{RESULTS}/tables/training_section.tex",
    "training_detail": f"{RESULTS}/tables/training_detail.tex",
}
# Every job's wall time: Snakemake's benchmark: files for the jobs that measure nothing, the measuring jobs' own
# records beside them (fwbench.workflow.jobtime says why), read by the study_time rule.
BENCHMARKS = f"{RESULTS}/benchmarks"


def benchmark_file(rule_name, wildcards=""):
    """The benchmark: file of a job that measures nothing: results/benchmarks/{rule}/{wildcards}.tsv."""
    return f"{BENCHMARKS}/{rule_name}/{wildcards or 'job'}.tsv"


def job_record(rule_name, wildcards):
    """The wall-time record a measuring job writes itself (fwbench.workflow.jobtime.timed_job)."""
    return f"{BENCHMARKS}/{rule_name}/{wildcards or 'job'}.json"


# Snakemake counts the gpu resource but assigns no GPU: with --resources gpu=N each cell takes one of N slots (a GPU
# and 1/N of the cores) itself. The count reaches the cells as a resource, not a param, so running more or fewer
# cells at once never makes finished cells stale.
GPU_SLOTS = max(
    1, int(getattr(workflow.global_resources.get("gpu"), "value", None) or 1)
)
CELL_THREADS = max(1, workflow.cores // GPU_SLOTS)
# On a SLURM cluster (profiles/slurm) each benchmark job asks for one GPU (gpu=1 becomes sbatch --gpus=1), its
# threads as cores, the time its processes may take at most (fwbench.workflow.cluster) and, unless cluster.share_nodes, its
# node to itself; its threads and memory come from the profile. Locally these resources mean nothing. Rules marked
# `localrule: True` (downloads, aggregation, figures, tables, LaTeX) run where Snakemake runs, never as jobs.
SLURM_EXTRA = cluster.slurm_extra(config)
# cluster.gpu_type / cluster.constraint: the GPU model every job that computes on a GPU asks for (None: any).
GPU_MODEL = cluster.gpu_model(config)
GPU_CONSTRAINT = cluster.constraint(config)


def runtime_minutes(rule_name):
    return cluster.runtime_minutes(config, rule_name)


SLOT_DIR = f"{RESULTS}/slots"
SOFTWARE_FINGERPRINT = canonical(
    requirements.software_fingerprint(RESTORED, software_fingerprint())
)
REPO_ROOT = Path(workflow.basedir).parent
# The paper's wording (report/templates/, fwbench.analysis.paper.templates): an input of every job that renders a
# template, so that an author who rewords a sentence reruns the report's jobs (seconds) and never a measuring one.
# All of them, since templates import one another (the sections and the conclusions share their macros).
TEMPLATES = sorted((REPO_ROOT / "report" / "templates").glob("*.j2"))
# A measuring job reads the device record but is not made stale by the device check's rerun (ancient()): adding a
# framework reruns the check, and must not remeasure the cells of the other frameworks that do not compare with it.
# What the check would change for a cell is its param instead: the device setting and its frameworks' software.
MEASURED_ON = ancient(DEVICE_RECORD)


def device_params(frameworks):
    """A measuring job's `device` param: the study's device setting and the installed versions of `frameworks`
    (fwbench.workflow.requirements.framework_software), as fwbench.workflow.comparison_jobs keys its cells.
    """
    return canonical(
        {
            "device": config["device"],
            "software": requirements.framework_software(
                SOFTWARE_FINGERPRINT, frameworks
            ),
        }
    )


# --sdm conda: a study that must run on a GPU gets the environment with JAX's CUDA plugin (same pins otherwise).
ENV = (
    "../../envs/fwbench-cuda.yaml"
    if config["device"] == "cuda"
    else "../../envs/fwbench.yaml"
)


wildcard_constraints:
    framework=WILDCARD_PATTERNS["framework"],
    mode=WILDCARD_PATTERNS["mode"],
    model=WILDCARD_PATTERNS["model"],
    precision=WILDCARD_PATTERNS["precision"],
    batch=WILDCARD_PATTERNS["batch"],


# Every cell's path by suite, listed once: several rules read whole suites (a 5,040-cell grid lists 5,040 paths each).
CELL_PATHS = {
    suite: cell_paths(config, RESULTS, suite=suite) for suite in config["suites"]
}


# Each suite's cells as one index file, written by cell_index, the input of the analyses that read a whole suite.
CELL_INDEX = f"{RESULTS}/index/{{suite}}.json"


def suite_indexes(*suites):
    """The cell indexes of those of `suites` the study runs."""
    return [CELL_INDEX.format(suite=suite) for suite in suites if suite in CELL_PATHS]


def inference_cells():
    return list(CELL_PATHS.get("inference", []))


def alternatives(names):
    """A wildcard constraint matching exactly these names."""
    return "|".join(sorted(names, key=len, reverse=True))


def comparison_settings(suite):
    """The settings param of a comparison job: its suite's measurement settings with what names batch sizes reduced
    to the job's (fwbench.study.params.comparison_settings), one value per batch size, computed once.
    """
    by_batch = {
        str(batch): params.comparison_settings(config, suite, batch)
        for batch in suite_batch_sizes(config, suite)
    }
    return lambda wildcards: by_batch[wildcards.batch]


# A comparison job's wildcards as its log and time record name them.
COMPARISON_JOB = "{model}/{precision}/bs{batch}"


def inference_group_outputs(model):
    """One comparison's cells: every framework in each of its modes (fwbench.study.grid.group_variants, config
    order) at the rule's {model}/{precision}/bs{batch}; `model` is any model of the rule (they share the modes).
    fwbench.workflow.comparison_jobs makes its cells in this order.
    """
    return [
        f"{RESULTS}/cells/inference/{framework}/{mode}/{{model}}/{{precision}}/bs{{batch}}.json"
        for framework, mode in group_variants(config, "inference", model)
    ]


# The parity check's logits come from the inference cells where the study has them (fwbench.scenarios.logits): no job
# builds and compiles every model again; without the inference suite, a job per framework computes them.
PARITY_FROM_CELLS = "inference" in config["suites"]


def parity_inputs(wildcards):
    """A framework's parity_logits job reads its inference cells in its first mode (every model, precision and batch
    size), or, without the inference suite, the dataset and every model's weights; PyTorch's reads those too for its
    float64 reference logits."""
    if PARITY_FROM_CELLS:
        mode = framework_modes(config, wildcards.framework)[0]
        prefix = f"{RESULTS}/cells/inference/{wildcards.framework}/{mode}/"
        cells = {
            "cells": [
                path for path in CELL_PATHS["inference"] if path.startswith(prefix)
            ]
        }
        if wildcards.framework != "torch":
            return cells
        return cells | {
            "dataset": DATASET_FILES,
            "weights": expand(WEIGHTS, model=config["models"]),
        }
    return {
        "dataset": DATASET_FILES,
        "weights": expand(WEIGHTS, model=config["models"]),
        "device": DEVICE_RECORD,
    }


def training_cells():
    return list(CELL_PATHS.get("training", []))


# The micro suite (fwbench.scenarios.micro): its operands, its cells by comparison group, and its analysis's outputs.
# Without the suite the analysis writes only the paper's one-sentence section and no macros.
MICRO = "micro" in config["suites"]
MICRO_OPERANDS = f"{RESULTS}/micro/operands.npz"
# The reference study's figures, copied into the repository with their source (reference/README.md).
MICRO_REFERENCE = str(REPO_ROOT / "reference" / "published-t4-micro.csv")
MICRO_OUTPUTS = {
    "section": f"{RESULTS}/tables/micro_section.tex",
    "detail": f"{RESULTS}/tables/micro_detail.tex",
    "macros": f"{RESULTS}/tables/micro_macros.tex",
} | (
    {
        "csv": f"{RESULTS}/tables/micro.csv",
        "speedups": f"{RESULTS}/tables/micro_speedups.csv",
        "crossovers": f"{RESULTS}/tables/micro_crossovers.csv",
        "pdf": f"{RESULTS}/figures/micro.pdf",
        "png": report(
            f"{RESULTS}/figures/micro.png",
            caption="../report/micro.rst",
            category="Micro-benchmarks",
        ),
    }
    if MICRO
    else {}
)


def micro_cells():
    return list(CELL_PATHS.get("micro", []))


def micro_group_outputs():
    """One comparison's cells: NumPy and every framework in each of its modes at the rule's
    {model}/{precision}/bs{batch} (mode_scope picks micro's modes by suite alone, so every operation's are alike).
    """
    return [
        f"{RESULTS}/cells/micro/{framework}/{mode}/{{model}}/{{precision}}/bs{{batch}}.json"
        for framework, mode in micro_variants()
    ]


def micro_variants():
    return group_variants(config, "micro", config["micro"]["operations"][0])


# The training section's inputs exist only when the study trains; without them the paper says it has no training.
TRAINING = "training" in config["suites"]
TRAINING_TABLES = (
    [f"{RESULTS}/tables/training.csv", f"{RESULTS}/tables/training_step0.csv"]
    if TRAINING
    else []
)
TRAINING_FIGURE = f"{RESULTS}/figures/training_curves.pdf" if TRAINING else []
TRAINING_REFERENCE = str(REPO_ROOT / "reference" / "published-l4-training.csv")
# Published vs reproduced: the published figure sets and how each was measured (reference/sources.yaml), and the
# fairness ledger with the study's own parity measurement; both feed the generated conclusions.
PUBLISHED_SOURCES = str(REPO_ROOT / "reference" / "sources.yaml")
PUBLISHED_CSV = f"{RESULTS}/tables/published.csv"
PARITY_CSV = f"{RESULTS}/tables/parity.csv"
LEDGER_CSV = f"{RESULTS}/tables/ledger.csv"


def published_files():
    """The files reference/sources.yaml names: editing one reruns the comparison."""
    from fwbench.analysis.published.sources import read_sources

    return [str(source.path) for source in read_sources(PUBLISHED_SOURCES)]


def measurement_settings(suite):
    """What a cell of `suite` measures under (fwbench.study.params.measurement_settings, as `fwbench run-cell` uses)."""
    return params.measurement_settings(config, suite)
