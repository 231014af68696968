"""The paper's generated conclusions and limitations (fwbench.analysis.paper.conclusions), its abstract, and the same
findings for the HTML report's front page (fwbench.analysis.paper.abstract)."""

from fwbench.analysis.inference.ratio_macros import include_deviating
from fwbench.analysis.inference.tidy import read_tidy
from fwbench.analysis.paper.abstract import abstract_from_tables, summary
from fwbench.analysis.paper.conclusions import conclusions_section
from fwbench.io import atomic_write_text
from fwbench.workflow.logs import redirect_to

with redirect_to(snakemake.log[0]):
    training = snakemake.input.training
    atomic_write_text(
        snakemake.output.section,
        conclusions_section(
            ratios=read_tidy(snakemake.input.speedups),
            inference=read_tidy(snakemake.input.inference),
            epochs=read_tidy(training[0]) if training else None,
            agreement=read_tidy(training[1]) if training else None,
            published=read_tidy(snakemake.input.published),
            ledger=read_tidy(snakemake.input.ledger),
            profile=read_tidy(snakemake.input.profile),
            # analysis.multiplicity where no ratio table row carries one (a change reruns aggregate_inference, whose
            # tables this rule reads)
            config={**snakemake.params.config, "analysis": snakemake.config.get("analysis", {})},
        ),
    )
    tables = (
        read_tidy(snakemake.input.speedups),
        read_tidy(snakemake.input.inference),
        read_tidy(snakemake.input.profile),
    )
    atomic_write_text(snakemake.output.abstract, abstract_from_tables(*tables, snakemake.params.config))
    frameworks = list(snakemake.params.config["frameworks"])
    counted = include_deviating(dict(snakemake.params.config))
    atomic_write_text(snakemake.output.summary, summary(*tables, frameworks, include_deviating=counted) + "\n")
