# Time to report: where the study's wall time went, from every job's time (results/benchmarks/) and each measuring
# process's own phases, for the paper's reproducibility section; it runs after every job it reports except the
# LaTeX build, which the paper rule measures itself and adds (workflow/scripts/paper.py).


rule study_time:
    input:
        cells=inference_cells() + training_cells() + micro_cells(),
        tables=list(PAPER_TABLES.values()),
        micro=list(MICRO_OUTPUTS.values()),
        generated=[
            rules.published_comparison.output.section,
            rules.fairness_ledger.output.section,
            rules.conclusions.output[0],
            rules.op_profile.output.section,
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
