"""Workloads: what is compiled and timed (the spec, the model zoo, the decoder, the steps)."""
