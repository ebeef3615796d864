"""Dataflow plans of the T-SAR BitLinear kernels: register allocation, loop structure, stream order.

A :class:`KernelPlan` fixes, for one configuration, dataflow and layer shape (M outputs, K inputs),
everything that the code generator (:mod:`tsar.kernels.tsar_codegen`) and the weight packer
(:mod:`tsar.kernels.formats.tsar`) must agree on. Both derive from it; nothing is restated.

Terms: a *tile* is ``m`` output rows (one TGEMV accumulator: 16 at 256 bits, 32 at 512); a *chunk*
is ``k`` consecutive inputs (one TLUT). ``T = M / m`` tiles, ``C = ceil(K / k)`` chunks. A weight
*operand* is the packed ``(m x k)`` tile/chunk block that one TGEMV reads (``cfg.weight_bytes``
bytes).

Padding: a K that ``k`` does not divide (c3s2, k = 6, at K = 2560) is zero-padded to
``K_pad = C * k``: the packer adds ``K_pad - K`` zero weight columns and the quantization step
writes zeros into the activations' padding bytes. Either alone makes the padded inputs add exactly
0 (a zero weight selects ``D - S`` terms that cancel in the accumulator's modular arithmetic, split
or trit codes, full or compact LUT; a zero activation makes every LUT entry of it 0); both are done
so that neither a foreign stream nor a reused workspace can leak into the sums. The padded weight
operands are read like any other: :attr:`KernelPlan.weight_bytes` (and every byte count and
loop bound derived from the chunks) includes them, which is their honest cost.

Registers: every flow allocates the registers the configuration's encoding addresses
(:attr:`KernelPlan.registers`: 16 with VEX, zmm0..31 with EVEX at 512 bits); LUT groups are packed
from the top, accumulators from register 0. The numbers below are 256-bit (c2s4-512 / c4s4-512 in
brackets).

Dataflows (paper section III-D):

* ``ap-min`` (activation-persistent, minimal registers): one LUT group at a time; for every chunk,
  TLUT once, then stream over all tiles, each tile's int16 accumulator loaded from and stored to an
  L1-resident partial-sum row.
* ``ap-max`` (activation-persistent, maximal registers): as many LUT groups as the register file
  holds, at most a widening window's chunks (``G``, c2s4: 7, c4s4: 1 [31, 7]) are built per batch
  of chunks, and the registers left over hold ``U`` tile accumulators (c2s4: 2, c4s4: 8 [1, 4]), so
  each partial-sum load/store serves ``G`` TGEMVs and loop iterations drop by ``U``.
* ``op`` (output-persistent): ``R`` tile accumulators (c2s4: 12, c4s4: 6 [29, 26]) stay in
  registers across the whole K loop; each TLUT serves ``R`` TGEMVs; nothing but the final sums is
  written back.
* ``op-tokens`` (output-persistent, token-blocked GEMM): the ``op`` core with the loops turned
  inside out for ``N`` tokens: tokens are quantized in blocks of ``TOKEN_BLOCK``, and each pass's
  weights (``R`` tiles x K, c2s4 at K = 6912: 331 KB) serve every token of the block while they
  sit in L1/L2, so the layer's weights come from memory once per block instead of once per token.
* ``ap-tokens`` (activation-persistent, token-blocked GEMM): tokens are quantized in blocks of
  ``TOKEN_BLOCK`` as for ``op-tokens``, and the LUT groups of ``G`` tokens of the block (one chunk
  each) live in registers at once. Per chunk the kernel builds them, then streams over the tiles of
  a tile block: each weight operand is read once per ``G`` tokens and applied to every token's LUT
  group, each token's int16 partial sums living in its own partial-sum row (load, TGEMV, store as
  ``ap-min``), widened into the token's int32 row after each window. Registers: one
  accumulator, the weight operand when it fills whole registers and at least two tokens' groups
  still fit beside it (else none), and ``G`` LUT groups from the top (at most ``TOKEN_BLOCK``).
  c2s4 (groups of 2 registers, weights in 1): accumulator ymm0, weights ymm1, ``G = 7`` groups in
  ymm2..ymm15, so each weight operand is loaded ONCE into a register and serves 7 tokens. c4s4
  (groups of 8, weights in an aligned pair): two groups would take all 16 registers, so ``G = 1``
  and the weights are a memory operand of every token's TGEMV (read from L1 once per token). At
  512 bits: c2s4-512 zmm0, zmm1, ``G = 16`` (the block; 30 would fit); c4s4-512 zmm0, the pair
  zmm2..3, ``G = 7`` groups of 4 in zmm4..31. The partial-sum rows of all ``TOKEN_BLOCK`` tokens
  share a ``PARTIAL_SUM_BYTES`` L1 budget, which sets the tile block (passes of up to 32 tiles =
  512 outputs [16 tiles]); the LUTs are rebuilt once per tile block. Traffic per token
  block: every weight operand from memory once (then from L1 for the block's other groups of ``G``
  tokens), partial sums one L1 load and store per TGEMV, activations one TLUT per chunk per tile
  block.

Overflow: every plan widens int16 accumulators into int32 after at most
``cfg.max_tgemv_per_widen()`` TGEMVs per lane (32 for c2s4, 16 for c4s4, at any width). Each TGEMV
adds at most ``127 * k`` in magnitude because BitNet's activations lie in [-127, 127], so a lane
that starts at 0 stays within ``n * 127 * k <= 32767``: int16 never wraps, for any ternary weights.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from tsar.isa.config import TsarConfig, configs, get_config

FLOWS = ("ap-min", "ap-max", "op", "op-tokens", "ap-tokens")
OUTPUT_PERSISTENT = ("op", "op-tokens")
TOKEN_BLOCKED = ("op-tokens", "ap-tokens")
"""GEMM dataflows: tokens in blocks of ``TOKEN_BLOCK``, each weight operand serving the whole block."""
TOKEN_BLOCK = 16
"""Tokens of one token block (workspace slots; the weights read for the block serve all of them)."""
PARTIAL_SUM_BYTES = 16 * 1024
"""``ap-tokens``: bytes of the block's int16 partial-sum rows (half of a 32 KiB L1D; the rest holds
the chunk's weight operands and activations)."""
KERNEL_PREFIX = "tsar-"
OP_TEMPS = 2  # registers the OP widening step needs
AP_TOKENS_ACCUMULATORS = 1  # ap-tokens: every TGEMV loads, accumulates and stores one partial-sum tile
QUANT_LANES = 8
"""float32 activations the quantization step converts per ymm register (K must be a multiple)."""


@dataclass(frozen=True)
class Window:
    """Chunks accumulated in int16 before one widening step, split into batches of LUT groups."""

    first_chunk: int
    batches: tuple[int, ...]  # chunks per batch; each batch is built into that many LUT groups

    @property
    def chunks(self) -> int:
        return sum(self.batches)


@dataclass(frozen=True)
class KernelPlan:
    """One T-SAR BitLinear kernel: configuration, dataflow and layer shape."""

    cfg: TsarConfig
    flow: str
    M: int
    K: int
    tile_block: int = 0
    """``ap-tokens``: tiles per pass instead of as many as ``PARTIAL_SUM_BYTES`` holds (0): the
    counts extrapolation simulates the kernel's code with smaller passes
    (:mod:`tsar.simulate.counts`); the kernels that run take the default."""

    def __post_init__(self) -> None:
        if self.flow not in FLOWS:
            raise ValueError(f"unknown dataflow {self.flow!r}; choose one of {', '.join(FLOWS)}")
        if self.tile_block and (self.flow != "ap-tokens" or self.tile_block < 0):
            raise ValueError(f"a tile block of {self.tile_block} is for ap-tokens kernels, positive")
        if self.M <= 0 or self.M % self.cfg.m:
            raise ValueError(f"M={self.M} must be a positive multiple of {self.cfg.m} for {self.cfg.name}")
        if self.K <= 0 or self.K % QUANT_LANES:
            raise ValueError(f"K={self.K} must be a positive multiple of {QUANT_LANES} for {self.cfg.name} "
                             f"(the kernels quantize {QUANT_LANES} float32 activations at a time)")
        reason = unsupported_reason(self.cfg)
        if reason:
            raise ValueError(f"{self.cfg.name}: {reason}")

    @property
    def name(self) -> str:
        return kernel_name(self.cfg, self.flow)

    @property
    def tiles(self) -> int:
        return self.M // self.cfg.m

    @property
    def chunks(self) -> int:
        """TLUT chunks of K (the last one zero-padded when ``k`` does not divide K)."""
        return -(-self.K // self.cfg.k)

    @property
    def K_pad(self) -> int:
        """K rounded up to whole chunks: the inputs the weight stream and the LUTs cover."""
        return self.chunks * self.cfg.k

    @property
    def padding(self) -> int:
        """Zero inputs appended to K (``K_pad - K``, fewer than ``k``)."""
        return self.K_pad - self.K

    @cached_property
    def widen_every(self) -> int:
        """TGEMVs a lane may take before widening (the overflow bound of the configuration)."""
        return self.cfg.max_tgemv_per_widen()

    # --- register allocation ---------------------------------------------------------------------
    @property
    def registers(self) -> int:
        """Vector registers the kernel allocates: all that the configuration's encoding addresses
        (VEX 16, EVEX 32)."""
        return self.cfg.addressable_registers

    @property
    def row_bits(self) -> int:
        """Width of the vectors of the kernel's int32 / float32 row code (widening, zeroing,
        dequantization): :func:`row_bits`."""
        return row_bits(self.cfg)

    @cached_property
    def groups(self) -> int:
        """LUT groups live at once (G): chunks per token times tokens."""
        return self.chunk_groups * self.token_groups

    @cached_property
    def chunk_groups(self) -> int:
        """LUT groups of one token live at once, one per chunk (``ap-max``: G, at most a window's
        chunks; else 1)."""
        if self.flow == "ap-max":
            return min((self.registers - 1) // self.cfg.group_regs, self.widen_every)
        return 1

    @cached_property
    def token_groups(self) -> int:
        """Tokens whose LUT groups live at once (``ap-tokens``: G, one chunk each; else 1)."""
        if self.flow != "ap-tokens":
            return 1
        return min(self._ap_tokens_groups(self.weights_in_register), self.token_block)

    @cached_property
    def weights_in_register(self) -> bool:
        """``ap-tokens``: each weight operand is loaded once into registers and applied to every
        token's LUT group (when it fills whole registers and at least two tokens' groups fit beside
        it); otherwise TGEMV reads it as a memory operand, once per token."""
        whole = self.cfg.weight_bytes == self.cfg.weight_regs * self.cfg.register_bytes
        return self.flow == "ap-tokens" and whole and self._ap_tokens_groups(True) >= 2

    def _ap_tokens_groups(self, weights_in_register: bool) -> int:
        below = self._weight_register_end if weights_in_register else AP_TOKENS_ACCUMULATORS
        return (self.registers - below) // self.cfg.group_regs

    @property
    def weight_register(self) -> int:
        """``ap-tokens`` with :attr:`weights_in_register`: first register of the weight operand
        (after the accumulators, aligned to its register count)."""
        n = self.cfg.weight_regs
        return -(-AP_TOKENS_ACCUMULATORS // n) * n

    @property
    def _weight_register_end(self) -> int:
        return self.weight_register + self.cfg.weight_regs

    @cached_property
    def accumulators(self) -> int:
        """int16 tile accumulators live at once (U for AP, R for OP)."""
        free = self.registers - self.groups * self.cfg.group_regs
        if self.flow == "ap-min":
            return 1
        if self.flow == "ap-tokens":
            return AP_TOKENS_ACCUMULATORS
        if self.flow == "ap-max":
            return free
        return min(free - OP_TEMPS, self.tiles)

    @property
    def token_block(self) -> int:
        """Tokens processed per block (workspace slots): ``TOKEN_BLOCK`` for the token-blocked
        flows, else 1."""
        return TOKEN_BLOCK if self.flow in TOKEN_BLOCKED else 1

    def tokens_for_counts(self, n: int) -> int:
        """Tokens to simulate so that per-token counts equal those of an ``n``-token run (for a
        whole number of blocks): 1 where every token runs the same code, else one block."""
        return min(n, self.token_block) if self.token_groups > 1 else min(n, 1)

    def group_register(self, g: int) -> int:
        """Base register of LUT group ``g``: groups are packed from the top, aligned."""
        return self.registers - (g + 1) * self.cfg.group_regs

    @property
    def first_temp(self) -> int:
        """First register the OP widening step may clobber (after the accumulators)."""
        return self.accumulators

    # --- loop structure --------------------------------------------------------------------------
    @cached_property
    def windows(self) -> tuple[Window, ...]:
        """The K loop: windows of at most ``widen_every`` chunks, split into batches of
        ``chunk_groups``."""
        g = self.chunk_groups
        per_window = (self.widen_every // g) * g
        out = []
        for start in range(0, self.chunks, per_window):
            n = min(per_window, self.chunks - start)
            batches = [g] * (n // g) + ([n % g] if n % g else [])
            out.append(Window(start, tuple(batches)))
        return tuple(out)

    @cached_property
    def pass_tiles(self) -> int:
        """Tiles of one pass over K: OP, the R accumulators; ``ap-tokens``, the tile block whose
        partial-sum rows of ``token_block`` tokens fit ``PARTIAL_SUM_BYTES``."""
        if self.flow == "ap-tokens":
            budget = PARTIAL_SUM_BYTES // (self.token_block * self.tile_partial_bytes)
            return min(self.tiles, self.tile_block or budget)
        return self.accumulators

    @cached_property
    def passes(self) -> tuple[tuple[int, int], ...]:
        """OP and ``ap-tokens``: ``(first_tile, tiles)`` of each pass over K."""
        r = self.pass_tiles
        return tuple((t, min(r, self.tiles - t)) for t in range(0, self.tiles, r))

    @property
    def tile_partial_bytes(self) -> int:
        """Bytes of one tile's partial sums (one accumulator register: ``m`` lanes of ``acc_bits``)."""
        return self.cfg.m * self.cfg.acc_bits // 8

    @property
    def tile_acc32_bytes(self) -> int:
        """Bytes of one tile's int32 sums."""
        return 4 * self.cfg.m

    # --- weight stream ---------------------------------------------------------------------------
    @cached_property
    def stream_order(self) -> tuple[np.ndarray, np.ndarray]:
        """``(tile, chunk)`` index arrays in the order the kernel's TGEMVs read weight operands."""
        tiles: list[np.ndarray] = []
        chunks: list[np.ndarray] = []
        if self.flow in (*OUTPUT_PERSISTENT, "ap-tokens"):
            for t0, r in self.passes:
                c, t = np.meshgrid(np.arange(self.chunks), np.arange(t0, t0 + r), indexing="ij")
                tiles.append(t.ravel())
                chunks.append(c.ravel())
        else:
            for window in self.windows:
                c0 = window.first_chunk
                for g in window.batches:
                    t, c = np.meshgrid(np.arange(self.tiles), np.arange(c0, c0 + g), indexing="ij")
                    tiles.append(t.ravel())
                    chunks.append(c.ravel())
                    c0 += g
        return np.concatenate(tiles), np.concatenate(chunks)

    @property
    def weight_bytes(self) -> int:
        """Bytes of the packed weight stream, padding columns included (``M x K_pad`` weights)."""
        return self.tiles * self.chunks * self.cfg.weight_bytes

    @property
    def reuse_bytes(self) -> int:
        """Weight bytes read by every token of a block before the next ones are read: ``op-tokens``,
        one pass over K; ``ap-tokens``, one chunk of one tile block; per-token flows, the layer."""
        wb = self.cfg.weight_bytes
        if self.flow == "op-tokens":
            return self.pass_tiles * self.chunks * wb
        if self.flow == "ap-tokens":
            return self.pass_tiles * wb
        return self.weight_bytes

    # --- workspace -------------------------------------------------------------------------------
    @cached_property
    def workspace_layout(self) -> dict[str, tuple[int, int]]:
        """Byte ``(offset, size)`` of each field of one token's slot, 64-byte aligned
        (``ap-tokens`` keeps its partial sums in the block's rows instead, :attr:`partials_offset`).
        ``xq`` holds the token's ``K_pad`` int8 activations, the last ``padding`` of them zero."""
        fields = {"xq": self.K_pad, "acc32": 4 * self.M, "partial16": self.tiles * self.tile_partial_bytes,
                  "dequant": 4}
        if self.flow == "ap-tokens":
            del fields["partial16"]
        layout, offset = {}, 0
        for name, size in fields.items():
            layout[name] = (offset, size)
            offset += -(-size // 64) * 64
        return layout

    @cached_property
    def slot_bytes(self) -> int:
        """Workspace bytes of one token (the fields of :attr:`workspace_layout`)."""
        offset, size = list(self.workspace_layout.values())[-1]
        return offset + -(-size // 64) * 64

    @property
    def partial_row_bytes(self) -> int:
        """``ap-tokens``: bytes of one token's partial-sum row (one tile block), else 0."""
        return self.pass_tiles * self.tile_partial_bytes if self.flow == "ap-tokens" else 0

    @property
    def partials_offset(self) -> int:
        """Workspace offset of the block's partial-sum rows (``token_block`` rows of
        :attr:`partial_row_bytes`, contiguous), after the slots."""
        return self.slot_bytes * self.token_block

    @property
    def workspace_bytes(self) -> int:
        """One slot per token of a block (:attr:`token_block`), then the partial-sum rows."""
        return self.partials_offset + self.token_block * self.partial_row_bytes


def row_bits(cfg: TsarConfig) -> int:
    """Width of the vectors the kernels' int32 and float32 rows are processed in: the configuration's
    width, at least the quantization step's (``QUANT_LANES`` float32 lanes, a ymm)."""
    return max(cfg.vector_bits, 32 * QUANT_LANES)


def unsupported_reason(cfg: TsarConfig) -> str | None:
    """Why the kernel generator cannot build kernels for ``cfg``, or None when it can: every
    tile's int32 row must be whole row vectors (``4m`` bytes, :func:`row_bits`), int16 partial sums
    being widened one row vector (half a register's lanes at 512 bits) at a time."""
    lanes = row_bits(cfg) // 32
    if cfg.m % lanes:
        return f"m={cfg.m} outputs per TGEMV: the kernels' int32 rows take multiples of {lanes} outputs"
    return None


def kernel_name(cfg: TsarConfig | str, flow: str) -> str:
    """``tsar-<config>-<flow>``, e.g. ``tsar-c2s4-op`` (the one place names are produced)."""
    return f"{KERNEL_PREFIX}{cfg if isinstance(cfg, str) else cfg.name}-{flow}"


def parse_kernel_name(name: str) -> tuple[TsarConfig, str]:
    """Inverse of :func:`kernel_name`: ``(configuration, flow)``; the flow is matched as a suffix,
    so configuration names may contain ``-`` (``tsar-c2s4-128-op``). Raises ValueError."""
    if name.startswith(KERNEL_PREFIX):
        for flow in sorted(FLOWS, key=len, reverse=True):
            if name.endswith(f"-{flow}"):
                config = name[len(KERNEL_PREFIX):-len(flow) - 1]
                try:
                    return get_config(config), flow
                except KeyError as exc:
                    raise ValueError(exc.args[0]) from None
    raise ValueError(f"{name!r} is not a T-SAR kernel name ({KERNEL_PREFIX}<config>-<flow>, flows: "
                     f"{', '.join(FLOWS)})")


def kernel_names(isa: Iterable[str] | None = None) -> tuple[str, ...]:
    """Every kernel of every registered configuration the generator supports; with ``isa`` (a CPU's
    or platform's flags), those of the configurations it runs (:meth:`TsarConfig.runs_on`: the
    512-bit ones need AVX-512)."""
    flags = None if isa is None else tuple(isa)
    return tuple(kernel_name(cfg, flow) for cfg in configs() if unsupported_reason(cfg) is None
                 and (flags is None or cfg.runs_on(flags)) for flow in FLOWS)


def make_plan(config: str | TsarConfig, flow: str, M: int, K: int, tile_block: int = 0) -> KernelPlan:
    cfg = get_config(config) if isinstance(config, str) else config
    return KernelPlan(cfg, flow, M, K, tile_block)
