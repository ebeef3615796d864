"""Ternary weight formats, T-SAR kernels and native baseline kernels."""
