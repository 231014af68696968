"""latexmk the paper, timed: the time-to-report table's LaTeX row and its total to the PDF come from this build (the
first pass, with placeholders), written into latex_time.tex, and one more latexmk run puts them in the PDF."""

import os
import shutil
import subprocess
import time
from pathlib import Path

from fwbench.analysis.time.study_time import latex_time_macros
from fwbench.io import read_json

build = Path(snakemake.params.build_dir)
build.mkdir(parents=True, exist_ok=True)
measured = build / "latex_time.tex"
env = {**os.environ, "TEXINPUTS": f"{build.resolve()}:{snakemake.params.search_path}:"}
command = ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", f"-outdir={build}", snakemake.input.tex]
# The span of the jobs before this one plus this build: a paper rebuilt alone later (after editing paper.tex) does not
# count the idle time since the study ended.
before_latex_s = read_json(snakemake.input.study_time_summary)["wall_s"]

with open(snakemake.log[0], "w") as log:
    measured.write_text(latex_time_macros(None, None))
    t0 = time.perf_counter()
    subprocess.run(command, stdout=log, stderr=subprocess.STDOUT, env=env, check=True)
    latex_s = time.perf_counter() - t0
    measured.write_text(latex_time_macros(latex_s, before_latex_s + latex_s))
    # Forced (-g): the macros just changed, so a pass is due. Left to latexmk's own records of what changed, a study's
    # PDF once kept the first pass's placeholders (a test run with another test process beside it, 2026-11-26).
    subprocess.run([command[0], "-g", *command[1:]], stdout=log, stderr=subprocess.STDOUT, env=env, check=True)
tmp = Path(f"{snakemake.output[0]}.tmp")
shutil.copyfile(build / "paper.pdf", tmp)
tmp.replace(snakemake.output[0])
