"""Weight storage formats: packers and unpackers for the native baselines and T-SAR kernels."""
