"""Functional simulator of x86-64 + AVX2 + T-SAR code (Unicorn for scalar code, own vector layer)."""
