# Published vs reproduced (reference/sources.yaml lists the published figure sets copied into the repository), and
# the paper's generated conclusions and limitations, which read it with the ledger.


rule published_comparison:
    input:
        sources=PUBLISHED_SOURCES,
        files=published_files(),
        inference=INFERENCE_CSV,
        speedups=SPEEDUPS_CSV,
        training=TRAINING_TABLES,
        # a published ratio in other modes than the ratio table pairs gets its paired interval from the cells
        cells=suite_indexes("inference"),
        templates=TEMPLATES,
    output:
        csv=report(
            PUBLISHED_CSV,
            caption="../report/published_table.rst",
            category="Published vs reproduced",
            subcategory="Tables",
        ),
        section=PUBLISHED_SECTION,
        pdf=f"{RESULTS}/figures/published_vs_reproduced.pdf",
        png=report(
            f"{RESULTS}/figures/published_vs_reproduced.png",
            caption="../report/published_figure.rst",
            category="Published vs reproduced",
            subcategory="Figures",
        ),
    log:
        f"{RESULTS}/logs/figures/published_comparison.log",
    benchmark:
        benchmark_file("published_comparison")
    localrule: True
    conda:
        ENV
    params:
        image_size=canonical(config["dataset"]["image_size"]),
        # a published ratio is reproduced only when shown equivalent within this margin (two one-sided tests)
        margin=canonical(config["analysis"]["equivalence_margin"]),
    script:
        "../scripts/published.py"


# The HTML report's front page: the findings the abstract says, in Markdown that reads as reStructuredText too.
REPORT_FRONT_PAGE = f"{RESULTS}/report/summary.rst"


rule conclusions:
    input:
        speedups=SPEEDUPS_CSV,
        inference=INFERENCE_CSV,
        training=TRAINING_TABLES,
        published=PUBLISHED_CSV,
        ledger=LEDGER_CSV,
        # the abstract names where a large difference comes from, from the profiled steps
        profile=PROFILE_CSV,
        # the wording (report/templates/): an author who rewords a sentence reruns only the report's jobs
        templates=TEMPLATES,
    output:
        section=CONCLUSIONS_SECTION,
        abstract=f"{RESULTS}/tables/abstract.tex",
        # the same findings for the HTML report's front page (the Snakefile's `report:`)
        summary=REPORT_FRONT_PAGE,
    log:
        f"{RESULTS}/logs/figures/conclusions.log",
    benchmark:
        benchmark_file("conclusions")
    localrule: True
    conda:
        ENV
    params:
        config=canonical(
            {
                key: config[key]
                for key in (
                    "frameworks",
                    "suites",
                    "models",
                    "precisions",
                    "dataset",
                    "training",
                    "fallbacks",
                    "modes",
                    "ratio_modes",
                )
            }
        ),
    script:
        "../scripts/conclusions.py"
