"""Two results directories compared ratio by ratio (`fwbench compare`): the ratios, the run facts, the report."""
