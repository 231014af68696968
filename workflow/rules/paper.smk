# The paper: LaTeX sources from report/, generated tables and figures from results/; build files stay in results/.


rule paper:
    input:
        tex=REPO_ROOT / "report" / "paper.tex",
        tables=rules.paper_tables.output,
        figure=rules.inference_figure.output.pdf,
        loader_figure=rules.loader_figure.output.pdf,
        training_figure=TRAINING_FIGURE,
    output:
        PAPER_PDF,
    log:
        f"{RESULTS}/logs/report/paper.log",
    conda:
        ENV
    params:
        build_dir=f"{RESULTS}/report/build",
        search_path=":".join(
            str(Path(d).resolve())
            for d in (REPO_ROOT / "report", f"{RESULTS}/tables", f"{RESULTS}/figures")
        ),
    shell:
        "mkdir -p {params.build_dir} && "
        "TEXINPUTS={params.search_path}: latexmk -pdf -interaction=nonstopmode -halt-on-error "
        "-outdir={params.build_dir} {input.tex} > {log} 2>&1 && "
        "cp {params.build_dir}/paper.pdf {output}.tmp && mv {output}.tmp {output}"
