"""Relative dynamic power from switching activity: toggles per block, weighted by cells.

A block's dynamic power is taken as proportional to its cell count times its switching activity
(bit toggles per signal bit per cycle of the block's named signals in an RTL simulation of a
kernel-like instruction stream). Only ratios are meaningful: no capacitance or voltage data is
available for this estimate.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tsar.isa.config import TsarConfig
from tsar.rtl.base import SliceOp
from tsar.rtl.bench import Driver, simulate
from tsar.rtl.reference import Instr
from tsar.rtl.regfile import vector_registers
from tsar.rtl.synth import SynthResult
from tsar.rtl.unit import VectorUnit

SLICE_SCOPE = ("bench", "top", "slice")


def parse_vcd(path: str | Path) -> dict[tuple[str, ...], tuple[int, int]]:
    """Per scope path: ``(bit toggles, signal bits)`` of the ``wire``/``reg`` variables declared in
    it (string-valued enum views are skipped). Toggles count changed bits between value changes."""
    scope: list[str] = []
    owners: dict[str, list[tuple[str, ...]]] = {}
    width: dict[str, int] = {}
    stats: dict[tuple[str, ...], list[int]] = {}
    last: dict[str, int] = {}
    with open(path) as f:
        tokens = iter(f.read().split())
        for tok in tokens:
            if tok == "$scope":
                next(tokens)
                scope.append(next(tokens))
            elif tok == "$upscope":
                scope.pop()
            elif tok == "$var":
                kind, bits, ident = next(tokens), int(next(tokens)), next(tokens)
                if kind in ("wire", "reg"):
                    owners.setdefault(ident, []).append(tuple(scope))
                    width[ident] = bits
                    stats.setdefault(tuple(scope), [0, 0])[1] += bits
            elif tok == "$enddefinitions":
                break
        for tok in tokens:
            c = tok[0]
            if c in "01xz" and len(tok) > 1:
                ident, value = tok[1:], int(c == "1")
            elif c == "b":
                value, ident = int(tok[1:].replace("x", "0").replace("z", "0"), 2), next(tokens)
            elif c in "sr":
                next(tokens)
                continue
            else:
                continue
            if ident not in owners:
                continue
            if ident in last:
                flips = (last[ident] ^ value).bit_count()
                for owner in owners[ident]:
                    stats[owner][0] += flips
            last[ident] = value
    return {k: (v[0], v[1]) for k, v in stats.items()}


def block_activity(path: str | Path, blocks: Sequence[str], cycles: int) -> dict[str, float]:
    """Toggles per signal bit per cycle of each block's scope subtree."""
    stats = parse_vcd(path)
    out = {}
    for block in blocks:
        prefix = (*SLICE_SCOPE, block)
        toggles = sum(t for s, (t, _) in stats.items() if s[:len(prefix)] == prefix)
        bits = sum(b for s, (_, b) in stats.items() if s[:len(prefix)] == prefix)
        out[block] = toggles / max(1, bits) / max(1, cycles)
    return out


def _rand(rng: np.random.Generator, bits: int) -> int:
    return int.from_bytes(rng.bytes(bits // 8), "little")


def base_stream(rng: np.random.Generator, n: int, vector_bits: int) -> list[Instr]:
    """A TL2-like AVX2 kernel mix: ``vpmaddubsw`` (activations x decoded weights) and ``vpmaddwd``
    (widening) with ``vpaddd`` / ``vpaddw`` accumulation and ``vpand`` / ``vpsubb`` decoding, on
    the registers of a ``vector_bits`` port."""
    ops = ["vpmaddubsw", "vpmaddubsw", "vpmaddwd", "vpaddd", "vpaddd", "vpaddw", "vpand", "vpsubb"]
    regs = vector_registers(vector_bits)
    return [Instr.base(ops[rng.integers(len(ops))], *(int(r) for r in rng.integers(0, regs, 3)))
            for _ in range(n)]


def tsar_stream(cfg: TsarConfig, n_tluts: int, tgemvs_per_tlut: int = 8) -> list[Instr]:
    """A GEMV inner loop: TLUT a block of activations, then TGEMVs into rotating accumulators with
    fresh weights each time, and a VPADDW (accumulator widening stand-in) per TLUT."""
    g = cfg.group_regs
    free = [r for r in range(vector_registers(cfg.vector_bits)) if r >= g]
    out = []
    for _ in range(n_tluts):
        out.append(Instr(SliceOp.TLUT, 0, 0, free[-1], cfg))
        for i in range(tgemvs_per_tlut):
            weights = free[-3] if i % 2 else free[-3 - cfg.weight_regs]
            weights &= ~(cfg.weight_regs - 1)
            out.append(Instr(SliceOp.TGEMV, free[i % 2], 0, weights, cfg))
        out.append(Instr.base("vpaddw", free[2], free[2], free[0]))
    return out


def stream_activity(unit: VectorUnit, program: Sequence[Instr],
                    seed: int = 0) -> tuple[dict[str, float], int]:
    """Run ``program`` back to back (random register contents, fresh random weights and activations
    loaded through the back door before each T-SAR instruction); returns activity per block."""
    rng = np.random.default_rng(seed)
    bits = unit.slice.vector_bits
    cycles = 0

    async def bench(drv: Driver) -> None:
        nonlocal cycles
        for r in range(vector_registers(bits)):
            drv.load(r, _rand(rng, bits))
        for instr in program:
            if instr.op is SliceOp.TGEMV:
                for r in range(instr.src2, instr.src2 + instr.cfg.weight_regs):
                    drv.load(r, _rand(rng, bits))
            elif instr.op is SliceOp.TLUT:
                drv.load(instr.src2, _rand(rng, bits))
            await drv.issue(instr)
        await drv.issue(Instr(SliceOp.NOP, 0))
        cycles = drv.cycle

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "stream.vcd"
        simulate(unit, bench, vcd=str(path))
        return block_activity(path, unit.slice.blocks, cycles), cycles


@dataclass(frozen=True)
class PowerEstimate:
    """Relative power per block (base slice on the base stream = 100)."""

    workload: str
    design: str
    blocks: dict[str, float]

    @property
    def total(self) -> float:
        return sum(self.blocks.values())


def relative_power(base_synth: SynthResult, tsar_synth: SynthResult, cfg: TsarConfig,
                   instructions: int = 120, seed: int = 0, isolate: bool = False) -> list[PowerEstimate]:
    """Three estimates: base slice and T-SAR slice on the same base stream, and the T-SAR slice
    on a TLUT/TGEMV kernel stream (``isolate``: the slices with operand isolation, as
    synthesized). Weights are the cells per block of the syntheses."""
    rng = np.random.default_rng(seed)
    bits, lr = cfg.vector_bits, "latch"
    program = base_stream(rng, instructions, bits)
    runs = [("base stream", base_synth, VectorUnit(bits, (), lr, isolate), program),
            ("base stream", tsar_synth, VectorUnit(bits, (cfg,), lr, isolate), program),
            ("T-SAR GEMV stream", tsar_synth, VectorUnit(bits, (cfg,), lr, isolate),
             tsar_stream(cfg, max(1, instructions // 40)))]
    raw = []
    for workload, synth, unit, prog in runs:
        activity, _ = stream_activity(unit, prog, seed)
        raw.append((workload, synth.name, {b: activity[b] * synth.blocks[b].cells for b in activity}))
    scale = 100 / sum(raw[0][2].values())
    return [PowerEstimate(w, d, {b: v * scale for b, v in blocks.items()}) for w, d, blocks in raw]


def format_power(estimates: Sequence[PowerEstimate]) -> str:
    from tsar.rtl.synth import PAPER_ROWS

    names = " ".join(f"{r[0][:18]:>18}" for r in PAPER_ROWS)
    head = f"{'workload':20} {'design':22} {names} {'total':>7}"
    lines = [head, "-" * len(head)]
    for e in estimates:
        cols = [sum(e.blocks.get(b, 0.0) for b in blocks) for _, blocks, *_ in PAPER_ROWS]
        lines.append(f"{e.workload:20} {e.design:22} " + " ".join(f"{c:>18.1f}" for c in cols)
                     + f" {e.total:>7.1f}")
    return "\n".join(lines)
