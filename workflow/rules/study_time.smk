# Time to report: where the study's wall time went, from every job's time (results/benchmarks/) and each measuring
# process's own phases, for the paper's reproducibility section; it runs after every job it reports except the
# LaTeX build, which the paper rule measures itself and adds (workflow/scripts/paper.py).


rule study_time:
    input:
        cells=suite_indexes("inference", "training", "micro"),
        tables=list(PAPER_TABLES.values()),
        micro=list(MICRO_OUTPUTS.values()),
        # paths, not rules.X.output: beside the cell list those make Snakemake hash it once per cell (common.smk)
        generated=[
            PUBLISHED_SECTION,
            LEDGER_SECTION,
            CONCLUSIONS_SECTION,
            PROFILE_SECTION,
        ],
        figures=[INFERENCE_FIGURE, LOADER_FIGURE, MODE_GAIN_FIGURE]
        + ([TRAINING_FIGURE] if TRAINING else []),
    output:
        table=f"{RESULTS}/tables/study_time.tex",
        macros=f"{RESULTS}/tables/study_time_macros.tex",
        csv=f"{RESULTS}/tables/study_time.csv",
        jobs=f"{RESULTS}/tables/study_time_jobs.csv",
        summary=f"{RESULTS}/tables/study_time.json",
    log:
        f"{RESULTS}/logs/report/study_time.log",
    localrule: True
    conda:
        ENV
    params:
        benchmarks=BENCHMARKS,
    script:
        "../scripts/study_time.py"
