"""Running cells: the runner and its supervised measuring children (workers), warm-worker blocks and their order, GPU
slots, the device check, failures and their workarounds, memory limits, threads, compile caches."""
