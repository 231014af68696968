# Where the time goes: the inference cells' op profiles (their profiling pass, inference.profile) as tables, a
# figure and the paper's section (fwbench.analysis.profile; docs/op-profile.md). Cells without a profile are read and
# left out, so a study that profiles nothing still gets the section, saying so.


rule op_profile:
    input:
        cells=suite_indexes("inference"),
        inference=INFERENCE_CSV,
        speedups=SPEEDUPS_CSV,
        templates=TEMPLATES,
    output:
        table=report(
            PROFILE_CSV,
            caption="../report/op_profile_table.rst",
            category="Where the time goes",
            subcategory="Tables",
        ),
        top=report(
            f"{RESULTS}/tables/op_profile_top.csv",
            caption="../report/op_profile_top.rst",
            category="Where the time goes",
            subcategory="Tables",
        ),
        unmapped=f"{RESULTS}/tables/op_profile_unmapped.csv",
        section=PROFILE_SECTION,
        pdf=f"{RESULTS}/figures/op_profile.pdf",
        png=report(
            f"{RESULTS}/figures/op_profile.png",
            caption="../report/op_profile_figure.rst",
            category="Where the time goes",
            subcategory="Figures",
        ),
    log:
        f"{RESULTS}/logs/figures/op_profile.log",
    benchmark:
        benchmark_file("op_profile")
    localrule: True
    conda:
        ENV
    script:
        "../scripts/op_profile.py"
