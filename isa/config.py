"""T-SAR design points: the parameters (c, s, vector width) and everything derived from them.

A :class:`TsarConfig` is the single source of truth for one TLUT/TGEMV pair. Register-group sizes,
operand widths, weight-code layouts, micro-op counts and overflow bounds are *computed* here and
nowhere else; the encoder, assembler, simulator, RTL and timing model all read them from here.

Terminology (paper section III-B): ``c`` weights per LUT index (block size), ``s`` blocks per
instruction, ``k = c*s`` activations per instruction, ``m`` outputs per TGEMV (one int16 lane each).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

LANE_BITS = 16
"""Width of one TGEMV accumulator lane and of one LUT entry (int16)."""

ADDER_TREE_FAN_IN = 4
"""Fan-in of the dot-product adder trees that TGEMV reuses (four 4:1 trees per 256-bit slice)."""

ACTIVATION_ABS_MAX = 127
"""BitNet quantizes activations symmetrically to [-127, 127] (per-token absmax)."""


@dataclass(frozen=True)
class TsarConfig:
    """One T-SAR configuration: ``TLUT{c}x{s}`` plus ``TGEMV{k}x{m}`` on a ``vector_bits`` datapath.

    ``slot`` is the configuration's encoding slot (low nibble of the opcode byte); it is assigned
    when the configuration is registered and must be unique among registered configurations.
    """

    name: str
    c: int
    s: int
    vector_bits: int = 256
    slot: int = 0

    def __post_init__(self) -> None:
        if not 1 <= self.c <= 4:
            raise ValueError(f"{self.name}: block size c={self.c} must be in 1..4")
        if self.s < 1:
            raise ValueError(f"{self.name}: blocks per instruction s={self.s} must be >= 1")
        if self.vector_bits not in (128, 256):
            raise ValueError(
                f"{self.name}: vector_bits={self.vector_bits}; VEX encodes 128 or 256 only"
            )
        if not 0 <= self.slot <= 15:
            raise ValueError(f"{self.name}: encoding slot {self.slot} must be in 0..15")
        if (self.group_words * LANE_BITS) % self.vector_bits:
            raise ValueError(
                f"{self.name}: a LUT group of {self.group_words} int16 words does not fill whole "
                f"{self.vector_bits}-bit registers"
            )
        if self.group_regs > 16 or 16 % self.group_regs:
            raise ValueError(
                f"{self.name}: a LUT group of {self.group_regs} registers does not tile the "
                "16 VEX-addressable registers"
            )
        if (self.s * self.m) % self.lanes:
            raise ValueError(f"{self.name}: s*m={self.s * self.m} not a multiple of the lanes")
        if self.weight_bits % 8 or (
            self.weight_bits > self.vector_bits and self.weight_bits % self.vector_bits
        ):
            raise ValueError(f"{self.name}: weight operand of {self.weight_bits} bits is not whole")

    # --- shape -----------------------------------------------------------------------------------
    @property
    def k(self) -> int:
        """Activations consumed per instruction pair (``c * s``)."""
        return self.c * self.s

    @property
    def lanes(self) -> int:
        """int16 lanes of one vector register."""
        return self.vector_bits // LANE_BITS

    @property
    def m(self) -> int:
        """Outputs per TGEMV: one int16 accumulator lane each."""
        return self.lanes

    @property
    def register_class(self) -> str:
        """Vector register class of this width (``"ymm"`` or ``"xmm"``)."""
        return {256: "ymm", 128: "xmm"}[self.vector_bits]

    @property
    def register_bytes(self) -> int:
        return self.vector_bits // 8

    # --- LUT group -------------------------------------------------------------------------------
    @property
    def patterns(self) -> int:
        """Binary patterns per block (``2^c``): entries in each of the D and S tables."""
        return 1 << self.c

    @property
    def block_words(self) -> int:
        """int16 words per block in the group: ``D[0..2^c)`` then ``S[0..2^c)``."""
        return 2 * self.patterns

    @property
    def group_words(self) -> int:
        """int16 words written by one TLUT (``s * 2^(c+1)``)."""
        return self.s * self.block_words

    @property
    def group_regs(self) -> int:
        """Consecutive vector registers in a LUT group; the base register is aligned to this."""
        return self.group_words * LANE_BITS // self.vector_bits

    # --- weight codes ----------------------------------------------------------------------------
    @property
    def code_bits(self) -> int:
        """Bits of one block's weight code: ``idxD`` (c bits) then ``idxS`` (c bits)."""
        return 2 * self.c

    @property
    def output_code_bits(self) -> int:
        """Bits of weight codes per output lane (``s * 2c``)."""
        return self.s * self.code_bits

    @property
    def weight_bits(self) -> int:
        """Bits of one TGEMV weight operand (``m * s * 2c``)."""
        return self.m * self.output_code_bits

    @property
    def weight_bytes(self) -> int:
        return self.weight_bits // 8

    @property
    def weight_regs(self) -> int:
        """Registers a register-form weight operand spans (an aligned group when > 1)."""
        return max(1, self.weight_bits // self.vector_bits)

    @property
    def bits_per_weight(self) -> float:
        return self.weight_bits / (self.m * self.k)

    # --- micro-ops (paper section III-C) ---------------------------------------------------------
    @property
    def tlut_uops(self) -> int:
        """TLUT micro-ops: each writes one full register of the group."""
        return self.group_regs

    @property
    def outputs_per_uop(self) -> int:
        """TGEMV outputs finished per micro-op: the lanes do ``lanes`` D-S subtractions, and the
        adder trees reduce them ``s`` at a time."""
        return self.lanes // self.s

    @property
    def tgemv_uops(self) -> int:
        """TGEMV micro-ops: ``s*m`` lane subtractions spread over ``lanes`` ALU lanes."""
        return self.s * self.m // self.lanes

    # --- numeric bounds --------------------------------------------------------------------------
    def tgemv_max_step(self, activation_abs_max: int = ACTIVATION_ABS_MAX) -> int:
        """Largest magnitude one TGEMV can add to a lane (``|sum_i w_i a_i| <= k * max|a|``)."""
        return self.k * activation_abs_max

    def max_tgemv_per_widen(self, activation_abs_max: int = ACTIVATION_ABS_MAX) -> int:
        """TGEMVs that may accumulate into a zeroed int16 lane before it must be widened to int32.

        ``n * k * max|a| <= 32767`` guarantees no wrap-around for any ternary weights (c2s4: 32,
        c4s4: 16 for BitNet's symmetric int8 activations)."""
        return ((1 << (LANE_BITS - 1)) - 1) // self.tgemv_max_step(activation_abs_max)

    # --- mnemonics -------------------------------------------------------------------------------
    @property
    def tlut_mnemonic(self) -> str:
        return f"tlut{self.c}x{self.s}"

    @property
    def tgemv_mnemonic(self) -> str:
        return f"tgemv{self.k}x{self.m}"

    @cached_property
    def title(self) -> str:
        return f"{self.tlut_mnemonic.upper()} + {self.tgemv_mnemonic.upper()} ({self.vector_bits}-bit)"


_REGISTRY: dict[str, TsarConfig] = {}


def register_config(config: TsarConfig) -> TsarConfig:
    """Add a configuration to the ISA; its name and encoding slot must be unused."""
    if config.name in _REGISTRY:
        raise ValueError(f"configuration {config.name!r} is already registered")
    for other in _REGISTRY.values():
        if other.slot == config.slot:
            raise ValueError(f"{config.name}: encoding slot {config.slot} is taken by {other.name}")
        if (other.tlut_mnemonic, other.vector_bits) == (config.tlut_mnemonic, config.vector_bits):
            raise ValueError(f"{config.name}: {config.tlut_mnemonic} already exists at this width")
    _REGISTRY[config.name] = config
    return config


def configs() -> tuple[TsarConfig, ...]:
    """All registered configurations, in slot order."""
    return tuple(sorted(_REGISTRY.values(), key=lambda cfg: cfg.slot))


def get_config(name: str) -> TsarConfig:
    try:
        return _REGISTRY[name]
    except KeyError:
        known = ", ".join(_REGISTRY)
        raise KeyError(f"unknown T-SAR configuration {name!r} (known: {known})") from None


C2S4 = register_config(TsarConfig("c2s4", c=2, s=4, vector_bits=256, slot=0))
"""The paper's AVX2 example: TLUT2x4 + TGEMV8x16."""

C4S4 = register_config(TsarConfig("c4s4", c=4, s=4, vector_bits=256, slot=1))
"""TLUT4x4 + TGEMV16x16 on AVX2: eight-register LUT groups, 512-bit weight operands."""

C2S4_128 = register_config(TsarConfig("c2s4-128", c=2, s=4, vector_bits=128, slot=2))
"""A 128-bit (NEON-like) datapath: TLUT2x4 + TGEMV8x8 (paper footnote 1)."""
