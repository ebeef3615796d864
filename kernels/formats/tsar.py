"""T-SAR weight format: the ISA's weight codes, in the order a kernel streams them.

Storage: ``cfg.weight_bytes`` per ``(m x k)`` operand (split codes: 2 bits per weight, the paper's
"1+1-bit split"; trit codes: ``ceil(c log2 3) / c`` bits). The bit layout inside one TGEMV operand
is the ISA's (:func:`tsar.isa.semantics.pack_tile`); the order of the operands is the kernel plan's
(:attr:`tsar.kernels.tsar_plan.KernelPlan.stream_order`): operand ``n`` of the stream holds rows
``[m*t, m*t + m)`` and inputs ``[k*c, k*c + k)`` for ``(t, c) = (tiles[n], chunks[n])``. When ``k``
does not divide K, the weights are padded with ``plan.padding`` zero columns to ``plan.K_pad``
(inputs ``K .. K_pad - 1`` of the last chunk), which add exactly 0 to every output.
"""

from __future__ import annotations

import numpy as np

from tsar.isa.semantics import pack_tile, unpack_tile
from tsar.kernels.formats._common import check_ternary
from tsar.kernels.tsar_plan import KernelPlan


def pack_weights(plan: KernelPlan, w_t: np.ndarray) -> np.ndarray:
    """Ternary int8 ``(M, K)`` weights -> the kernel's weight stream, uint8 ``(plan.weight_bytes,)``
    (zero columns appended up to ``K_pad``)."""
    w_t = check_ternary(w_t, f"{plan.name} pack_weights")
    if w_t.shape != (plan.M, plan.K):
        raise ValueError(f"{plan.name}: expected ({plan.M}, {plan.K}) weights, got {w_t.shape}")
    cfg = plan.cfg
    if plan.padding:
        w_t = np.pad(w_t, ((0, 0), (0, plan.padding)))
    blocks = w_t.reshape(plan.tiles, cfg.m, plan.chunks, cfg.k).transpose(0, 2, 1, 3)
    operands = pack_tile(cfg, blocks)  # (tiles, chunks, weight_bytes)
    tiles, chunks = plan.stream_order
    return np.ascontiguousarray(operands[tiles, chunks]).reshape(-1)


def unpack_weights(plan: KernelPlan, stream: np.ndarray) -> np.ndarray:
    """Inverse of :func:`pack_weights`: the weight stream -> ternary int8 ``(M, K)`` (the padding
    columns stripped; ValueError if any of them is not zero)."""
    stream = np.asarray(stream, dtype=np.uint8)
    if stream.shape != (plan.weight_bytes,):
        raise ValueError(f"{plan.name}: expected {plan.weight_bytes} stream bytes, got {stream.shape}")
    cfg = plan.cfg
    operands = np.empty((plan.tiles, plan.chunks, cfg.weight_bytes), np.uint8)
    tiles, chunks = plan.stream_order
    operands[tiles, chunks] = stream.reshape(-1, cfg.weight_bytes)
    blocks = unpack_tile(cfg, operands)  # (tiles, chunks, m, k)
    w = np.ascontiguousarray(blocks.transpose(0, 2, 1, 3)).reshape(plan.M, plan.K_pad)
    if w[:, plan.K:].any():
        raise ValueError(f"{plan.name}: nonzero weights in the padding columns {plan.K}..{plan.K_pad - 1} "
                         f"of the {plan.M} x {plan.K} stream")
    return np.ascontiguousarray(w[:, :plan.K])
