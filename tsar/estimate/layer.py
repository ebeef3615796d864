"""Modelled time of one linear layer for N tokens, from the simulated counts of one token or block.

The single estimator behind ``tsar compare``, the model estimates, the report and the dataflow
selection (:mod:`tsar.estimate.dataflow`), so that all of them rank kernels the same way:

* :func:`counts_for`: what is simulated: one token for GEMV and for the per-token dataflows (they
  run tokens one after another and re-stream the weights), one block of ``min(N, GEMM_BLOCK)``
  tokens for the GEMM kernels (token-blocked T-SAR dataflows and the natives' token-blocked loops);
* :func:`modelled`: :func:`tsar.sim.timing.predict.predict` on a platform with the layer's data
  streams (weights once per simulated run, activations, outputs), scaled by ``N / tokens``.
"""

from __future__ import annotations

from tsar.kernels.tsar_plan import KERNEL_PREFIX
from tsar.sim.platforms import Platform, host, load
from tsar.sim.timing.memory import linear_streams
from tsar.sim.timing.predict import predict
from tsar.simulate.counts import GEMM_BLOCK, KernelCounts, simulated_counts


def platform_named(name: str) -> Platform:
    """``host`` (this machine, detected) or a shipped / .toml platform."""
    return host() if name == "host" else load(name)


def token_blocked(kernel: str, M: int, K: int) -> bool:
    """Whether a T-SAR kernel is a token-blocked GEMM dataflow (weights serve a block of tokens)."""
    from tsar.simulate.tsar_kernel import plan_for

    return plan_for(kernel, M, K).token_block > 1


def counts_request(kernel: str, N: int, M: int, K: int) -> tuple[str, int, int, int]:
    """``(kernel, M, K, tokens)`` of :func:`counts_for` (for :func:`tsar.simulate.counts.announced`)."""
    gemm = N > 1 and (not kernel.startswith(KERNEL_PREFIX) or token_blocked(kernel, M, K))
    return kernel, M, K, min(N, GEMM_BLOCK) if gemm else 1


def counts_for(kernel: str, N: int, M: int, K: int) -> KernelCounts:
    """The counts a time for ``N`` tokens is modelled from: one token for GEMV and for the per-token
    dataflows, one block of ``min(N, GEMM_BLOCK)`` tokens for GEMM kernels when N > 1."""
    _, M, K, tokens = counts_request(kernel, N, M, K)
    return simulated_counts(kernel, M, K, tokens=tokens)


def modelled(c: KernelCounts, platform: Platform, n: int, threads: int,
             weight_footprint: float | None = None) -> tuple[float, str]:
    """Seconds for ``n`` tokens and the bound, from one simulated token or block of ``c.tokens``
    tokens (scaled by ``n / c.tokens``). ``weight_footprint``: bytes of weights touched between two
    reads of this layer's weights (default: this layer's; in decode, the whole model's, so that
    weights come from wherever the model fits)."""
    streams = linear_streams(c.M, c.K, c.tokens, weight_bits=8.0 * c.weight_bytes / (c.M * c.K),
                             weight_footprint=weight_footprint)
    p = predict(c.stats, c.code, c.code_address, platform, threads=threads, streams=streams)
    return n / c.tokens * p.seconds, p.bound


