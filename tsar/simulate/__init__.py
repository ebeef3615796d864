"""Simulating kernels and models: T-SAR kernels, native kernels in the simulator,
a model's BitLinear layers, and the cached instruction counts."""
