"""Supporting the Snakemake workflow: its state, job times, logs, the cluster profile, scheduler status, the HTML report
check."""
