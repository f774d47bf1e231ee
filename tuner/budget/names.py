"""The names of a sweep's phases: what the budget's shares, gains and forecasts are keyed by, and what each phase
calls itself (``tuner.sweep.phases``)."""

CUDA_GRAPHS = "CUDA graphs"
FREEZING = "freezing"
SITES = "template sites"
GRAPH_KNOBS = "graph knobs"
FUSION = "fusion groupings"
KERNELS = "Triton kernels"
WHOLE_CHECK = "whole-workload check"
