"""Check the built paper as a reader sees it (fwbench.analysis.paper.pdf_check) and its shape (length, headline figure,
captions: fwbench.analysis.paper.structure_check): the report and the page images, and the study stops with each
problem named when there is any."""

import json

from fwbench.analysis.paper.pdf_check import PaperCheckError
from fwbench.analysis.paper.structure_check import check_paper_and_structure
from fwbench.io import atomic_write_json
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    report = check_paper_and_structure(
        pdf=snakemake.input.pdf,
        log=snakemake.params.latex_log,
        main_tex=snakemake.input.tex,
        search_path=snakemake.params.search_path,
        pages_dir=snakemake.output.pages,
    )
    print(json.dumps(report, indent=2))
    if report["problems"]:
        # Snakemake removes a failed job's outputs: the report stays in the log, the problems go to the terminal.
        raise PaperCheckError(report, snakemake.log[0])
    atomic_write_json(snakemake.output.report, report)
