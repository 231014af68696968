# Aggregation: all cell JSONs -> one tidy table, plus the environment summary the paper prints.

# The compiled-over-eager gain within a framework (fwbench.analysis.inference.ratios.mode_gains): its own table and figure.
MODE_GAINS_CSV = f"{RESULTS}/tables/mode_gains.csv"


# One suite's cell paths as one file, for the analyses that read every cell of a suite (fwbench.results.read_cell_index):
# Snakemake resolves each input file of each job while it plans, so one rule names the cells rather than six.
rule cell_index:
    input:
        lambda wildcards: CELL_PATHS[wildcards.suite],
    output:
        CELL_INDEX,
    log:
        f"{RESULTS}/logs/report/cell_index_{{suite}}.log",
    benchmark:
        benchmark_file("cell_index", "{suite}")
    wildcard_constraints:
        suite=WILDCARD_PATTERNS["suite"],
    localrule: True
    conda:
        ENV
    script:
        "../scripts/cell_index.py"


rule aggregate_inference:
    input:
        cells=inference_cells(),
        facts=expand(FACTS, model=config["models"]),
        peak=PEAK_RECORD,
    output:
        csv=report(
            INFERENCE_CSV,
            caption="../report/inference_table.rst",
            category="Inference",
            subcategory="Tables",
        ),
        speedups=report(
            SPEEDUPS_CSV,
            caption="../report/speedups_table.rst",
            category="Inference",
            subcategory="Tables",
        ),
        mode_gains=report(
            MODE_GAINS_CSV,
            caption="../report/mode_gains_table.rst",
            category="Inference",
            subcategory="Tables",
        ),
    log:
        f"{RESULTS}/logs/aggregate/inference.log",
    benchmark:
        benchmark_file("aggregate_inference")
    localrule: True
    conda:
        ENV
    params:
        # which mode of each framework the ratios between frameworks pair (fwbench.study.modes.ratio_mode)
        ratio_modes=canonical(config["ratio_modes"]),
        # how the ratios' verdicts are adjusted within each family (fwbench.analysis.common.verdicts.adjust_verdicts)
        analysis=canonical(config["analysis"]),
    script:
        "../scripts/aggregate.py"


rule aggregate_training:
    input:
        cells=training_cells(),
    output:
        epochs=report(
            f"{RESULTS}/tables/training.csv",
            caption="../report/training_table.rst",
            category="Training",
            subcategory="Tables",
        ),
        step0=report(
            f"{RESULTS}/tables/training_step0.csv",
            caption="../report/training_step0.rst",
            category="Training",
            subcategory="Tables",
        ),
    log:
        f"{RESULTS}/logs/aggregate/training.log",
    benchmark:
        benchmark_file("aggregate_training")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/aggregate_training.py"
