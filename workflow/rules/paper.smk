# The paper: LaTeX sources from report/, generated tables and figures from results/; build files stay in results/.
# The script times its LaTeX build for the time-to-report table and rebuilds once with the measured value in it.


rule paper:
    input:
        tex=REPO_ROOT / "report" / "paper.tex",
        tables=list(PAPER_TABLES.values()),
        study_time=rules.study_time.output,
        study_time_summary=rules.study_time.output.summary,
        figure=INFERENCE_FIGURE,
        loader_figure=LOADER_FIGURE,
        training_figure=TRAINING_FIGURE,
        micro=list(MICRO_OUTPUTS.values()),
    output:
        PAPER_PDF,
    log:
        f"{RESULTS}/logs/report/paper.log",
    benchmark:
        benchmark_file("paper")
    conda:
        ENV
    params:
        build_dir=f"{RESULTS}/report/build",
        search_path=":".join(
            str(Path(d).resolve())
            for d in (REPO_ROOT / "report", f"{RESULTS}/tables", f"{RESULTS}/figures")
        ),
    script:
        "../scripts/paper.py"
