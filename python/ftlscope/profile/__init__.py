"""`ftlscope profile`: the suites, the target identity, and the run from device to record."""
