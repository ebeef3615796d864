"""T-SAR weight format: dense/sparse codes (``idxD | idxS << c``), in the order a kernel streams them.

Storage: 2 bits per weight (the paper's "1+1-bit split"). The bit layout inside one TGEMV operand is
the ISA's (:func:`tsar.isa.semantics.pack_tile`); the order of the operands is the kernel plan's
(:attr:`tsar.kernels.tsar_plan.KernelPlan.stream_order`): operand ``n`` of the stream holds rows
``[16t, 16t + 16)`` and inputs ``[k*c, k*c + k)`` for ``(t, c) = (tiles[n], chunks[n])``.
"""

from __future__ import annotations

import numpy as np

from tsar.isa.semantics import pack_tile, unpack_tile

from ..tsar_plan import KernelPlan
from ._common import check_ternary


def pack_weights(plan: KernelPlan, w_t: np.ndarray) -> np.ndarray:
    """Ternary int8 ``(M, K)`` weights -> the kernel's weight stream, uint8 ``(plan.weight_bytes,)``."""
    w_t = check_ternary(w_t, f"{plan.name} pack_weights")
    if w_t.shape != (plan.M, plan.K):
        raise ValueError(f"{plan.name}: expected ({plan.M}, {plan.K}) weights, got {w_t.shape}")
    cfg = plan.cfg
    blocks = w_t.reshape(plan.tiles, cfg.m, plan.chunks, cfg.k).transpose(0, 2, 1, 3)
    operands = pack_tile(cfg, blocks)  # (tiles, chunks, weight_bytes)
    tiles, chunks = plan.stream_order
    return np.ascontiguousarray(operands[tiles, chunks]).reshape(-1)


def unpack_weights(plan: KernelPlan, stream: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_weights`: the weight stream -> ternary int8 ``(M, K)``."""
    stream = np.asarray(stream, dtype=np.uint8)
    if stream.shape != (plan.weight_bytes,):
        raise ValueError(f"{plan.name}: expected {plan.weight_bytes} stream bytes, got {stream.shape}")
    cfg = plan.cfg
    operands = np.empty((plan.tiles, plan.chunks, cfg.weight_bytes), np.uint8)
    tiles, chunks = plan.stream_order
    operands[tiles, chunks] = stream.reshape(-1, cfg.weight_bytes)
    blocks = unpack_tile(cfg, operands)  # (tiles, chunks, m, k)
    return np.ascontiguousarray(blocks.transpose(0, 2, 1, 3)).reshape(plan.M, plan.K)
