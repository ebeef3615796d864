"""The proxy engine: the native engine with each T-SAR site replaced by uop-equivalent
AVX2 for timing on silicon (results meaningless)."""
