from fwbench.analysis.common.cells import load_cells
from fwbench.analysis.time import study_time
from fwbench.io import atomic_write_json, atomic_write_text
from fwbench.results import read_cell_index
from fwbench.workflow.jobtime import read_jobs
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    jobs = read_jobs(snakemake.params.benchmarks)
    processes = study_time.process_rows(load_cells(read_cell_index(list(snakemake.input.cells))))
    summary = study_time.breakdown(jobs, processes)
    atomic_write_text(snakemake.output.table, study_time.latex_table(summary, latex_pending=True))
    atomic_write_text(snakemake.output.macros, study_time.latex_macros(summary))
    atomic_write_text(snakemake.output.csv, study_time.table_rows(summary).to_csv(index=False))
    atomic_write_text(snakemake.output.jobs, study_time.jobs_frame(jobs).to_csv(index=False))
    atomic_write_json(snakemake.output.summary, study_time.summary_json(summary))
    print(study_time.text_report(summary))
