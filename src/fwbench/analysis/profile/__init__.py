"""The paper's section "Where the time goes": each profiled inference cell's time per step split by operation
category (`metrics.op_profile`, written by fwbench.trackers.op_profile in a process of its own after the timed
trials), its tables, its stacked-bar figure, and the values (`findings`) with which report/templates/profile.tex.j2
says which categories account for most of each resolved ratio beyond 1.25x; fwbench.analysis.paper.profile_section
renders it."""
