"""T-SAR design points: the parameters (c, s, vector width) and everything derived from them.

A :class:`TsarConfig` is the single source of truth for one TLUT/TGEMV pair. Register-group sizes,
operand widths, weight-code layouts, micro-op counts and overflow bounds are *computed* here and
nowhere else; the encoder, assembler, simulator, RTL and timing model all read them from here.

Terminology (paper section III-B): ``c`` weights per LUT index (block size), ``s`` blocks per
instruction, ``k = c*s`` activations per instruction, ``m`` outputs per TGEMV (one accumulator lane
each).

Variant axes (DESIGN.md section 3) are fields with the paper's choices as defaults; every layer asks
the configuration (``word_index``, ``code_field``, ``acc_bits``, ...) instead of restating them:

* ``lut_layout``: ``"full"`` = per block the D table then the S table; ``"compact"`` = the S table
  only, TGEMV deriving ``D[p] = 2*S[p] - S[2^c-1]`` (:data:`LUT_LAYOUTS` lists the layouts and the
  tables each stores, :meth:`TsarConfig.tgemv_terms` the lookups TGEMV makes per code);
* ``lut_bits``: width of one LUT entry; ``acc_bits``: width of one TGEMV accumulator lane
  (``m = vector_bits / acc_bits``; 32: int32 lanes that never need widening);
* ``weight_code``: ``"split"`` = the paper's ``idxD | idxS << c`` codes of ``2c`` bits;
  ``"trits"`` = the block's ``c`` weights as one base-3 number ``sum_i (w_i + 1) * 3^i`` in
  ``ceil(c * log2 3)`` bits (c = 3: 5 bits, 1.67 bits per weight), decoded by TGEMV into the same
  ``(idxD, idxS)`` (:meth:`TsarConfig.code_indices`).

A configuration whose axes differ from the paper's carries a mnemonic suffix
(:attr:`TsarConfig.variant_suffix`: ``c`` compact LUT, ``d`` int32 accumulators, ``t`` trit
codes), so that its
instructions never share a mnemonic with the paper's (``tlut2x4c`` / ``tgemv8x16c``).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from functools import cached_property
from typing import Any

VECTOR_REGISTERS = 16
"""Vector registers a VEX encoding addresses (xmm/ymm 0..15)."""

EVEX_VECTOR_REGISTERS = 32
"""Vector registers an EVEX encoding addresses (xmm/ymm/zmm 0..31)."""

OPMASK_REGISTERS = 8
"""AVX-512 opmask registers (k0..k7; k0 as a write mask means "no masking")."""

MAX_VECTOR_BYTES = 64
"""Bytes of the widest vector register (zmm, 512 bits)."""

VECTOR_WIDTHS: dict[int, tuple[str, str]] = {128: ("xmm", "vex"), 256: ("ymm", "vex"), 512: ("zmm", "evex")}
"""Supported datapath widths (bits): the register class and the prefix that encodes each."""

BASE_ISA: dict[int, tuple[str, ...]] = {128: ("avx2",), 256: ("avx2",), 512: ("avx512f", "avx512bw")}
"""Per width, the CPU flags (``/proc/cpuinfo`` names) of the vector ISA the extension is added to:
the kernels' surrounding code (loads, widening, stores) uses it, so a CPU or platform runs the
configurations whose flags it has (:meth:`TsarConfig.runs_on`)."""

ENCODING_SLOTS = 16
"""Encoding slots of T-SAR configurations: the low nibble of the TLUT / TGEMV opcode byte."""

LUT_LAYOUTS: dict[str, tuple[str, ...]] = {"full": ("D", "S"), "compact": ("S",)}
"""LUT layouts and the tables each stores per block, in word order (``"full"``: ``D_b`` then
``S_b``, ``2^c`` entries each; ``"compact"``: ``S_b`` only)."""

TGEMV_TERMS: dict[str, tuple[tuple[str, str, int], ...]] = {
    "full": (("D", "idxD", 1), ("S", "idxS", -1)),
    "compact": (("S", "idxD", 2), ("S", "all", -1), ("S", "idxS", -1)),
}
"""Per LUT layout, the lookups one TGEMV makes per weight code: ``(table, index, coefficient)``,
``index`` being ``"idxD"`` / ``"idxS"`` (the code's fields) or ``"all"`` (pattern ``2^c - 1``).
The code's contribution is ``sum coefficient * table[index]``: ``D[idxD] - S[idxS]`` in full, and
``2*S[idxD] - S[2^c-1] - S[idxS]`` in compact (``D[p] = 2*S[p] - S[2^c-1]``)."""

VARIANT_TAGS: dict[tuple[str, object], str] = {("lut_layout", "compact"): "c", ("acc_bits", 32): "d",
                                               ("weight_code", "trits"): "t"}
"""Mnemonic suffix letter of each non-default variant-axis value (:attr:`TsarConfig.variant_suffix`)."""

WEIGHT_CODES: dict[str, str] = {
    "split": "idxD | idxS << c (2c bits per block)",
    "trits": "sum_i (w_i + 1) * 3^i (ceil(c log2 3) bits per block; codes >= 3^c are reserved and "
             "decode as c zero weights)",
}
"""Weight-code formats of the TGEMV operand."""

LUT_BITS = (16,)
"""Supported LUT-entry widths (bits)."""

ACC_BITS = (16, 32)
"""Supported accumulator-lane widths (bits)."""

ADDER_TREE_FAN_IN = 4
"""Fan-in of the dot-product adder trees that TGEMV reuses (four 4:1 trees per 256-bit slice)."""

ACTIVATION_ABS_MAX = 127
"""BitNet quantizes activations symmetrically to [-127, 127] (per-token absmax)."""


def registers_at(vector_bits: int) -> int:
    """Vector registers the encoding of a ``vector_bits`` datapath addresses (:data:`VECTOR_WIDTHS`:
    VEX xmm/ymm 16, EVEX zmm 32)."""
    return EVEX_VECTOR_REGISTERS if VECTOR_WIDTHS[vector_bits][1] == "evex" else VECTOR_REGISTERS


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
    lut_layout: str = "full"
    lut_bits: int = 16
    acc_bits: int = 16
    weight_code: str = "split"

    def __post_init__(self) -> None:
        if self.lut_layout not in LUT_LAYOUTS:
            raise ValueError(f"{self.name}: lut_layout={self.lut_layout!r}; known: "
                             f"{', '.join(LUT_LAYOUTS)}")
        if self.weight_code not in WEIGHT_CODES:
            raise ValueError(f"{self.name}: weight_code={self.weight_code!r}; known: "
                             f"{', '.join(WEIGHT_CODES)}")
        if self.lut_bits not in LUT_BITS:
            raise ValueError(f"{self.name}: lut_bits={self.lut_bits}; supported: {LUT_BITS}")
        if self.acc_bits not in ACC_BITS:
            raise ValueError(f"{self.name}: acc_bits={self.acc_bits}; supported: {ACC_BITS}")
        if not 1 <= self.c <= 4:
            raise ValueError(f"{self.name}: block size c={self.c} must be in 1..4")
        if self.s < 1:
            raise ValueError(f"{self.name}: blocks per instruction s={self.s} must be >= 1")
        if self.vector_bits not in VECTOR_WIDTHS:
            raise ValueError(
                f"{self.name}: vector_bits={self.vector_bits}; supported: "
                + ", ".join(f"{bits} ({prefix.upper()})" for bits, (_, prefix) in VECTOR_WIDTHS.items())
            )
        if not 0 <= self.slot < ENCODING_SLOTS:
            raise ValueError(f"{self.name}: encoding slot {self.slot} must be in 0..{ENCODING_SLOTS - 1}")
        if (self.group_words * self.lut_bits) % self.vector_bits:
            raise ValueError(
                f"{self.name}: a LUT group of {self.group_words} {self.lut_bits}-bit words does not "
                f"fill whole {self.vector_bits}-bit registers"
            )
        if self.group_regs > self.addressable_registers or self.addressable_registers % self.group_regs:
            raise ValueError(
                f"{self.name}: a LUT group of {self.group_regs} registers does not tile the "
                f"{self.addressable_registers} {self.encoding.upper()}-addressable registers"
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
        """Datapath lanes of one vector register at the LUT-entry width (``vector_bits / lut_bits``):
        the ALU lanes that do TLUT's adds and TGEMV's D - S subtractions."""
        return self.vector_bits // self.lut_bits

    @property
    def acc_lanes(self) -> int:
        """Accumulator lanes of one vector register (``vector_bits / acc_bits``)."""
        return self.vector_bits // self.acc_bits

    @property
    def m(self) -> int:
        """Outputs per TGEMV: one accumulator lane each."""
        return self.acc_lanes

    @property
    def acc_dtype(self) -> str:
        """numpy dtype name of one accumulator lane (``"int16"`` or ``"int32"``)."""
        return f"int{self.acc_bits}"

    @property
    def lut_dtype(self) -> str:
        """numpy dtype name of one LUT entry (``"int16"``)."""
        return f"int{self.lut_bits}"

    @property
    def acc_max(self) -> int:
        """Largest value an accumulator lane holds (``2^(acc_bits-1) - 1``)."""
        return (1 << (self.acc_bits - 1)) - 1

    @property
    def needs_widening(self) -> bool:
        """Whether kernels must widen the accumulators to int32 (only narrower ones need it)."""
        return self.acc_bits < 32

    @property
    def register_class(self) -> str:
        """Vector register class of this width (``"xmm"``, ``"ymm"`` or ``"zmm"``)."""
        return VECTOR_WIDTHS[self.vector_bits][0]

    @property
    def encoding(self) -> str:
        """Prefix that encodes this width: ``"vex"`` (128, 256 bits) or ``"evex"`` (512 bits)."""
        return VECTOR_WIDTHS[self.vector_bits][1]

    @property
    def base_isa(self) -> tuple[str, ...]:
        """CPU flags of the vector ISA this width extends (:data:`BASE_ISA`)."""
        return BASE_ISA[self.vector_bits]

    def runs_on(self, flags: Iterable[str]) -> bool:
        """Whether a CPU or platform with ``flags`` would run this configuration's kernels: it has
        the base ISA of the width (an empty ``flags``, an undeclared ISA, counts as AVX2)."""
        return set(self.base_isa) <= (set(flags) or {"avx2"})

    @property
    def addressable_registers(self) -> int:
        """Vector registers the encoding addresses (VEX: 16, EVEX: 32; :func:`registers_at`)."""
        return registers_at(self.vector_bits)

    @property
    def register_bytes(self) -> int:
        return self.vector_bits // 8

    # --- LUT group -------------------------------------------------------------------------------
    @property
    def patterns(self) -> int:
        """Binary patterns per block (``2^c``): entries in each of the D and S tables."""
        return 1 << self.c

    @property
    def lut_tables(self) -> tuple[str, ...]:
        """Tables stored per block, in word order (``("D", "S")`` for the full layout)."""
        return LUT_LAYOUTS[self.lut_layout]

    @property
    def block_words(self) -> int:
        """LUT words per block in the group: each table of :attr:`lut_tables`, ``2^c`` entries."""
        return len(self.lut_tables) * self.patterns

    @property
    def group_words(self) -> int:
        """LUT words written by one TLUT (``s * block_words``)."""
        return self.s * self.block_words

    @property
    def group_regs(self) -> int:
        """Consecutive vector registers in a LUT group; the base register is aligned to this."""
        return self.group_words * self.lut_bits // self.vector_bits

    def word_index(self, block: int, table: str, pattern: int) -> int:
        """Index in the group (flat array of LUT words) of entry ``pattern`` of table ``table``
        (``"D"`` or ``"S"``) of block ``block``."""
        return block * self.block_words + self.lut_tables.index(table) * self.patterns + pattern

    def word_meaning(self, word: int) -> tuple[int, str, int]:
        """Inverse of :meth:`word_index`: ``(block, table, pattern)`` of group word ``word``."""
        block, e = divmod(word, self.block_words)
        table, pattern = divmod(e, self.patterns)
        return block, self.lut_tables[table], pattern

    # --- weight codes ----------------------------------------------------------------------------
    @property
    def code_bits(self) -> int:
        """Bits of one block's weight code: split, ``idxD`` (c bits) then ``idxS`` (c bits); trits,
        the ``3^c`` values of one base-3 number (``ceil(c * log2 3)``: c = 3: 5, c = 5: 8)."""
        if self.weight_code == "trits":
            return (self.code_values - 1).bit_length()
        return 2 * self.c

    @property
    def code_values(self) -> int:
        """Codes the packer produces per block (split: ``2^(2c)``, of which ``3^c`` are ternary;
        trits: ``3^c``; codes from ``3^c`` to ``2^code_bits - 1`` are reserved)."""
        return 3 ** self.c if self.weight_code == "trits" else 1 << 2 * self.c

    def code_field(self, output: int, block: int) -> tuple[int, int]:
        """``(bit offset, bits)`` of the code of (``output``, ``block``) in the weight operand:
        output ``j``'s codes at ``[j*s*code_bits, (j+1)*s*code_bits)``, block ``b`` at ``b*code_bits``."""
        return output * self.output_code_bits + block * self.code_bits, self.code_bits

    @cached_property
    def code_table(self) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """``(idxD, idxS)`` of every code value ``0 .. 2^code_bits - 1``: the decoder as a table.

        Trits: digit ``d_i = (code // 3^i) % 3`` is weight ``w_i = d_i - 1``; ``idxD`` bit ``i`` is
        ``w_i != -1``, ``idxS`` bit ``i`` is ``w_i == 0`` (the split code's bits for the same
        weights). Reserved codes (``>= 3^c``) decode as ``c`` zero weights (both indices all ones),
        which contribute exactly 0 in every layout."""
        ones = self.patterns - 1
        if self.weight_code == "split":
            codes = range(1 << self.code_bits)
            return tuple(v & ones for v in codes), tuple(v >> self.c & ones for v in codes)
        dense, sparse = [], []
        for code in range(1 << self.code_bits):
            d = s = ones
            if code < self.code_values:
                digits = [code // 3 ** i % 3 for i in range(self.c)]
                d = sum((digit != 0) << i for i, digit in enumerate(digits))
                s = sum((digit == 1) << i for i, digit in enumerate(digits))
            dense.append(d)
            sparse.append(s)
        return tuple(dense), tuple(sparse)

    def code_indices(self, code: Any) -> tuple[Any, Any]:
        """``(idxD, idxS)`` of one weight code, or elementwise of an integer array of codes.

        Split: the bit fields ``idxD | idxS << c`` (also of hardware values: the RTL's operand
        paths); trits: :attr:`code_table` (an int, or a numpy integer array)."""
        if self.weight_code == "split":
            return code & (self.patterns - 1), (code >> self.c) & (self.patterns - 1)
        if isinstance(code, int):
            dense, sparse = self.code_table
            return dense[code], sparse[code]
        import numpy as np

        dense, sparse = self._code_arrays
        code = np.asarray(code)
        return dense[code], sparse[code]

    @cached_property
    def _code_arrays(self) -> tuple[Any, Any]:
        """:attr:`code_table` as two numpy index arrays (built once per configuration)."""
        import numpy as np

        return tuple(np.asarray(t, np.intp) for t in self.code_table)

    def make_code(self, idx_d: int, idx_s: int) -> int:
        """The weight code of ``(idxD, idxS)``; inverse of :meth:`code_indices`. Trits encode the
        ternary pairs only (``idxS`` a subset of ``idxD``): anything else is a ValueError."""
        if self.weight_code == "split":
            return idx_d | idx_s << self.c
        if idx_s & ~idx_d or not 0 <= idx_d < self.patterns:
            raise ValueError(f"{self.name}: (idxD={idx_d}, idxS={idx_s}) is not a ternary block "
                             "(a sparse bit without its dense bit): no trit code")
        return sum((2 if idx_d >> i & 1 and not idx_s >> i & 1 else idx_s >> i & 1) * 3 ** i
                   for i in range(self.c))

    def tgemv_terms(self) -> tuple[tuple[str, str, int], ...]:
        """The lookups TGEMV makes per weight code (:data:`TGEMV_TERMS` of the LUT layout)."""
        return TGEMV_TERMS[self.lut_layout]

    def term_pattern(self, index: str, code: int) -> int:
        """The pattern a term with ``index`` (``"idxD"``, ``"idxS"``, ``"all"``) looks up for ``code``."""
        if index == "all":
            return self.patterns - 1
        idx_d, idx_s = self.code_indices(code)
        return idx_d if index == "idxD" else idx_s

    @property
    def output_code_bits(self) -> int:
        """Bits of weight codes per output lane (``s * code_bits``)."""
        return self.s * self.code_bits

    @property
    def weight_bits(self) -> int:
        """Bits of one TGEMV weight operand (``m * s * code_bits``)."""
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

        ``n * k * max|a| <= acc_max`` guarantees no wrap-around for any ternary weights (int16:
        c2s4 32, c4s4 16 for BitNet's symmetric int8 activations)."""
        return self.acc_max // self.tgemv_max_step(activation_abs_max)

    # --- mnemonics -------------------------------------------------------------------------------
    @property
    def variant_suffix(self) -> str:
        """Mnemonic suffix naming the non-default variant axes (:data:`VARIANT_TAGS`), "" for the
        paper's choices."""
        return "".join(tag for (axis, value), tag in VARIANT_TAGS.items() if getattr(self, axis) == value)

    @property
    def tlut_mnemonic(self) -> str:
        return f"tlut{self.c}x{self.s}{self.variant_suffix}"

    @property
    def tgemv_mnemonic(self) -> str:
        return f"tgemv{self.k}x{self.m}{self.variant_suffix}"

    def definition(self) -> dict[str, object]:
        """The configuration's fields as plain data (the keys of an ``--isa`` TOML table)."""
        return {f.name: getattr(self, f.name) for f in fields(self)}

    @cached_property
    def title(self) -> str:
        return f"{self.tlut_mnemonic.upper()} + {self.tgemv_mnemonic.upper()} ({self.vector_bits}-bit)"


_REGISTRY: dict[str, TsarConfig] = {}
_SORTED: list[tuple[TsarConfig, ...]] = []  # configs() since the registry last changed (or empty)
_VERSION = [0]  # bumped by every change of the registry


def register_config(config: TsarConfig) -> TsarConfig:
    """Add a configuration to the ISA; its name and encoding slot must be unused."""
    if config.name in _REGISTRY:
        raise ValueError(f"configuration {config.name!r} is already registered")
    for other in _REGISTRY.values():
        if other.slot == config.slot:
            raise ValueError(f"{config.name}: encoding slot {config.slot} is taken by {other.name}")
        for mnemonic in (config.tlut_mnemonic, config.tgemv_mnemonic):
            if mnemonic in (other.tlut_mnemonic, other.tgemv_mnemonic) and \
                    other.vector_bits == config.vector_bits:
                raise ValueError(f"{config.name}: {mnemonic} already exists at this width "
                                 f"(configuration {other.name})")
    _REGISTRY[config.name] = config
    _changed()
    return config


def ensure_registered(config: TsarConfig) -> TsarConfig:
    """``config`` registered: a no-op when an identical configuration already is (e.g. in a worker
    process that loaded the same ``--isa`` file), else :func:`register_config`."""
    if _REGISTRY.get(config.name) == config:
        return config
    return register_config(config)


def unregister_config(name: str) -> None:
    """Remove a configuration registered with :func:`register_config` (for experiments and tests)."""
    if _REGISTRY.pop(name, None) is None:
        raise KeyError(f"configuration {name!r} is not registered")
    _changed()


def _changed() -> None:
    _SORTED.clear()
    _VERSION[0] += 1


def registry_version() -> int:
    """A number that changes whenever a configuration is registered or removed: part of the key
    of every cache of something the registry decides (what a mnemonic or an opcode means)."""
    return _VERSION[0]


def configs() -> tuple[TsarConfig, ...]:
    """All registered configurations, in slot order (the same tuple until the registry changes)."""
    if not _SORTED:
        _SORTED.append(tuple(sorted(_REGISTRY.values(), key=lambda cfg: cfg.slot)))
    return _SORTED[0]


def free_slots(taken: Iterable[int] = ()) -> list[int]:
    """The encoding slots that no registered configuration uses and ``taken`` does not hold,
    lowest first."""
    used = {cfg.slot for cfg in _REGISTRY.values()} | set(taken)
    return [slot for slot in range(ENCODING_SLOTS) if slot not in used]


def registered(name: str) -> TsarConfig | None:
    """The configuration registered under ``name``, or None."""
    return _REGISTRY.get(name)


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

C2S4_512 = register_config(TsarConfig("c2s4-512", c=2, s=4, vector_bits=512, slot=3))
"""The paper's c2s4 at AVX-512 width (EVEX): TLUT2x4 into one zmm + TGEMV8x32."""

C4S4_512 = register_config(TsarConfig("c4s4-512", c=4, s=4, vector_bits=512, slot=4))
"""c4s4 at AVX-512 width (EVEX): TLUT4x4 into four zmm + TGEMV16x32 on 1024-bit weight operands."""

WIDE_CONFIGS = (C2S4_512, C4S4_512)
"""The 512-bit design points (the Workstation's and Laptop's AVX-512 width)."""

PAPER_CONFIGS = (C2S4, C4S4)
"""The paper's two AVX2 design points, which the validation, the demo and the sweep report single
out."""
