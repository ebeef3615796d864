"""Amaranth model of the 256-bit SIMD slice, base and with the T-SAR additions."""
