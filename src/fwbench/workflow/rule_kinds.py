"""Which of the workflow's rules measure and which only write the report, so that results measured by other code can
be written up by this checkout's (`fwbench restore --report-only`, fwbench.workflow.restore).

A measuring rule's files depend on the machine and the frameworks that made them: the cells, the device check and
the peak probe, the parity logits, the loader's throughput, and the data, weights and model facts they were computed
from. They are kept as measured. A report rule's job reads only results and writes tables, figures and the paper with
no framework: those are what a change of wording, analysis or layout changes, so a report-only restore leaves them
out and this checkout writes them again. Every rule of the workflow is one or the other
(tests/test_archive.py reads the rule files and fails on a rule in neither set), so a new rule has to be
placed here before an archive can be written up around it.
"""

from __future__ import annotations

# Rules whose jobs measure or compute with a framework, and what they read, in the order the data flows between them:
# a rule's jobs read only files of the stages before its own. A comparison rule is named after its suite's group
# rule, with `_primary` for the models outside mode_scope (fwbench.study.grid.comparison_rules).
MEASURING_STAGES = (
    ("download_dataset",),
    ("prepare_dataset",),
    ("device_check", "init_weights", "model_facts", "micro_operands"),
    ("device_peak", "loader_throughput"),
    ("inference_group", "inference_group_primary", "training_cell", "micro_group"),
    ("parity_logits",),
    ("parity",),
)
MEASURING_RULES = frozenset(rule for stage in MEASURING_STAGES for rule in stage)
# Rules whose jobs read results only and write the report: tables, figures, the paper and its check.
REPORT_RULES = frozenset(
    {
        "cell_index",
        "aggregate_inference",
        "aggregate_training",
        "micro_analysis",
        "op_profile",
        "inference_figure",
        "mode_gain_figure",
        "headline_figure",
        "loader_figure",
        "training_figure",
        "paper_tables",
        "fairness_ledger",
        "published_comparison",
        "conclusions",
        "study_time",
        "paper",
        "paper_check",
    }
)
# Rules without a job of their own (the default target).
TARGET_RULES = frozenset({"all"})


def is_report_rule(rule: str | None) -> bool:
    """Whether `rule`'s files are written again by a report-only restore; a file no rule made (a log, a job time) and
    a rule this module does not know are kept as measured, never silently rewritten."""
    return rule in REPORT_RULES


def measuring_stage(rule: str | None) -> int:
    """The stage of a measuring rule in MEASURING_STAGES; after every stage for a file no measuring rule made (a log
    or a job time, which Snakemake counts among a job's outputs when it compares times, and no job reads)."""
    for stage, rules in enumerate(MEASURING_STAGES):
        if rule in rules:
            return stage
    return len(MEASURING_STAGES)
