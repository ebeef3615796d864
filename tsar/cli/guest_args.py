"""Guest-call arguments on the command line (``--arg`` / ``--out`` of ``tsar run`` and ``tsar time``):
their syntax, the argparse action that keeps them in order, and the parser that turns one into a
value or an array."""

from __future__ import annotations

import argparse

import numpy as np

from tsar.common.files import load_arrays
from tsar.errors import UserError

ARG_SYNTAX = """\
arguments (--arg / --out, in call order; integers and pointers go to rdi, rsi, rdx, rcx, r8, r9,
then the stack; floats to xmm0..7):
  2560, 0x10, -3            an integer
  f32:1.5, f64:0.25         a float / double value
  DTYPE:SHAPE[:INIT]        a new array, passed by pointer and copied back after the call
                            DTYPE: i8 u8 i16 u16 i32 u32 i64 u64 f32 f64
                            SHAPE: 2560 or 16x2560
                            INIT:  random (default: full range; i8 uses -127..127), zeros,
                                   ones, ternary (-1/0/+1), range, fill=VALUE
  FILE.npy                  an array loaded from a .npy file
  --out DTYPE:SHAPE         like --arg DTYPE:SHAPE:zeros, and printed after the call
T-SAR BitLinear kernels (FILE = gemv or gemm):
  tsar run gemv --kernel tsar-c2s4-op --shape 1x2560x2560
  tsar run gemm --kernel auto --shape 8x2560x6912
  --shape is N x M x K (tokens, outputs, inputs); --kernel auto picks the dataflow from simulated
  counts; the float output is checked bit for bit against tsar.kernels.reference.bitlinear.
examples:
  tsar run kernels/asm/gemv16_c2s4.s --fn gemv16_c2s4 --arg i8:2560 --arg u8:10240 \\
      --out i32:16 --arg 2560
  tsar run dot.so --fn dot_i8 --arg i8:4096 --arg i8:4096 --arg 4096 --returns i32"""

MAX_ARRAY_BYTES = 8 << 30
"""Largest array argument (bytes); larger requests are refused before allocating."""

_DTYPES = {"i8": np.int8, "u8": np.uint8, "i16": np.int16, "u16": np.uint16, "i32": np.int32,
           "u32": np.uint32, "i64": np.int64, "u64": np.uint64, "f32": np.float32, "f64": np.float64}


class CallArg(argparse.Action):
    """Collect --arg and --out in command-line order."""

    def __call__(self, parser, namespace, values, option_string=None):
        items = list(getattr(namespace, "call_args", None) or [])
        items.append((option_string == "--out", values))
        namespace.call_args = items


def parse_arg(spec: str, rng: np.random.Generator) -> object:
    """One --arg value: an int, a float, or a numpy array."""
    if spec.endswith(".npy"):
        array = load_arrays(spec, "a NumPy array (.npy)")
        if isinstance(array, dict):
            raise UserError(f"{spec}: not a NumPy array (.npy): a .npz archive")
        return array
    try:
        return int(spec, 0)
    except ValueError:
        pass
    parts = spec.split(":")
    kind = parts[0]
    if kind in ("f32", "f64") and len(parts) == 2 and "x" not in parts[1]:
        try:
            value = float(parts[1])
            return np.float32(value) if kind == "f32" else value
        except ValueError:
            pass
    if kind not in _DTYPES or len(parts) not in (2, 3):
        raise UserError(f"bad argument {spec!r} (see 'tsar run --help' for the syntax)")
    dt = np.dtype(_DTYPES[kind])
    try:
        shape = tuple(int(n) for n in parts[1].split("x"))
    except ValueError:
        raise UserError(f"bad shape in {spec!r}") from None
    if any(n < 0 for n in shape):
        raise UserError(f"negative size in {spec!r}")
    if int(np.prod(shape)) * dt.itemsize > MAX_ARRAY_BYTES:
        raise UserError(f"{spec!r} needs {int(np.prod(shape)) * dt.itemsize / 2**30:.1f} GiB "
                        f"(at most {MAX_ARRAY_BYTES >> 30} GiB per array)")
    init = parts[2] if len(parts) == 3 else "random"
    if init == "random":
        if dt.kind == "f":
            return rng.standard_normal(shape).astype(dt)
        info = np.iinfo(dt)
        low = -127 if dt == np.int8 else info.min
        return rng.integers(low, info.max, size=shape, endpoint=True, dtype=dt)
    if init == "zeros":
        return np.zeros(shape, dt)
    if init == "ones":
        return np.ones(shape, dt)
    if init == "ternary":
        return rng.integers(-1, 2, size=shape).astype(dt)
    if init == "range":
        return np.arange(int(np.prod(shape))).astype(dt).reshape(shape)
    if init.startswith("fill="):
        try:
            value = float(init[5:]) if dt.kind == "f" else int(init[5:], 0)
        except ValueError:
            raise UserError(f"bad fill value in {spec!r}") from None
        if dt.kind != "f" and not np.iinfo(dt).min <= value <= np.iinfo(dt).max:
            info = np.iinfo(dt)
            raise UserError(f"fill value {value} is outside {kind}'s range [{info.min}, {info.max}] "
                            f"in {spec!r}")
        return np.full(shape, value, dt)
    raise UserError(f"unknown initializer {init!r} in {spec!r}")
