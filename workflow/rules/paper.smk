# The paper: LaTeX sources from report/, generated tables and figures from results/; build files stay in results/.
# The script times its LaTeX build for the time-to-report table and rebuilds once with the measured value in it.


rule paper:
    input:
        tex=REPO_ROOT / "report" / "paper.tex",
        tables=list(PAPER_TABLES.values()),
        study_time=rules.study_time.output,
        study_time_summary=rules.study_time.output.summary,
        figure=INFERENCE_FIGURE,
        mode_gain_figure=MODE_GAIN_FIGURE,
        headline_figure=HEADLINE_FIGURE,
        loader_figure=LOADER_FIGURE,
        training_figure=TRAINING_FIGURE,
        micro=list(MICRO_OUTPUTS.values()),
        published=rules.published_comparison.output.section,
        published_figure=rules.published_comparison.output.pdf,
        ledger=rules.fairness_ledger.output.section,
        conclusions=rules.conclusions.output,
        profile=rules.op_profile.output.section,
        profile_figure=rules.op_profile.output.pdf,
    output:
        report(
            PAPER_PDF,
            caption="../report/paper.rst",
            category="Paper",
            subcategory="PDF",
        ),
    log:
        f"{RESULTS}/logs/report/paper.log",
    benchmark:
        benchmark_file("paper")
    localrule: True
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


# The paper as a reader sees it: its LaTeX log, its sources (report/paper.tex and the generated inputs) and the PDF,
# every page rendered (fwbench.analysis.paper.pdf_check), and its shape (fwbench.analysis.paper.structure_check). A
# paper with an undefined reference, a "??", an overfull box, an unreferenced float, text below 7 pt, an abstract over
# 150 words, a body over 8 pages, the headline figure after page 2, a caption over three lines or a model's
# configuration identifier in the body fails here, so a study whose PDF is broken does not finish silently.
PAPER_CHECK = f"{RESULTS}/report/paper_check.json"


rule paper_check:
    input:
        pdf=PAPER_PDF,
        tex=REPO_ROOT / "report" / "paper.tex",
    output:
        report=PAPER_CHECK,
        pages=directory(f"{RESULTS}/report/pages"),
    log:
        f"{RESULTS}/logs/report/paper_check.log",
    benchmark:
        benchmark_file("paper_check")
    localrule: True
    conda:
        ENV
    params:
        latex_log=f"{RESULTS}/report/build/paper.log",
        search_path=[rules.paper.params.build_dir]
        + rules.paper.params.search_path.split(":"),
    script:
        "../scripts/paper_check.py"
