"""``tsar demo``: the whole pipeline on an embedded default (grows with the environment)."""

from __future__ import annotations

import argparse

import numpy as np

from tsar import paths
from tsar.isa import C2S4, assemble_file, disassemble, format_lines, pack_tile, tgemv, tlut

NAME = "demo"
HELP = "run the T-SAR pipeline end to end on a built-in example"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--seed", type=int, default=0, help="seed of the random example data")


def run(args: argparse.Namespace) -> int:
    source = paths.kernel_source("gemv16_c2s4.s")
    print(f"[1/3] assemble {source.name}")
    program = assemble_file(source)
    print(program.listing_text())
    print(f"\n[2/3] disassemble ({len(program.code)} bytes)")
    print(format_lines(disassemble(program.code), program.symbols))

    print("\n[3/3] golden semantics: one TLUT2x4 + TGEMV8x16 against numpy")
    rng = np.random.default_rng(args.seed)
    act = rng.integers(-127, 128, C2S4.k).astype(np.int8)
    tile = rng.integers(-1, 2, (C2S4.m, C2S4.k))
    got = tgemv(C2S4, np.zeros(C2S4.m, np.int16), tlut(C2S4, act), pack_tile(C2S4, tile))
    want = tile @ act.astype(np.int64)
    print(f"  TGEMV : {got.tolist()}\n  W @ a : {want.tolist()}")
    ok = np.array_equal(got, want)
    print("  bit-exact" if ok else "  MISMATCH")
    return 0 if ok else 1
