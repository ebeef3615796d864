"""T-SAR: a co-design environment for ternary-LLM instruction-set extensions on x86 CPUs.

Layers: :mod:`tsar.isa` (instructions), :mod:`tsar.sim` (functional simulator),
:mod:`tsar.rtl` (Amaranth SIMD slice), :mod:`tsar.kernels` (formats, T-SAR and native kernels).
"""

__version__ = "0.1.0"
