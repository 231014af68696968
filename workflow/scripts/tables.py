from fwbench.analysis.paper.inputs import write_paper_inputs
from fwbench.analysis.setup.provenance import commit_label
from fwbench.results import read_cell_index
from fwbench.trackers.environment import git_state
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    write_paper_inputs(
        csv=snakemake.input.csv,
        speedups_csv=snakemake.input.speedups,
        mode_gains_csv=snakemake.input.mode_gains,
        cell_paths=read_cell_index(list(snakemake.input.cells)),
        facts=snakemake.input.facts,
        weights=snakemake.input.weights,
        manifest=snakemake.input.manifest,
        preprocess=snakemake.input.preprocess,
        loader=snakemake.input.loader,
        training=snakemake.input.training,
        config={
            "frameworks": snakemake.params.frameworks,
            "study": snakemake.params.study,
            "report": snakemake.params.report,
            "dataset": snakemake.params.dataset,
            "inference": snakemake.params.inference,
            "fallbacks": snakemake.params.fallbacks,
            # the multiplicity setting where no ratio table row carries one (a change reruns aggregate_inference,
            # whose tables this rule reads, so it needs no parameter of its own)
            "analysis": snakemake.config.get("analysis", {}),
        },
        outputs=dict(snakemake.output.items()),
        training_reference=snakemake.input.training_reference,
        # the code writing the paper, which a report-only restore makes differ from the code that measured
        written_at=commit_label(git_state()),
    )
