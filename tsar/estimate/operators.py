"""The operators of a token besides the BitLinear matrices, timed on a platform.

Every operator is real AVX2 code (``kernels/native/ops.c``), simulated and counted
(:func:`tsar.simulate.operators.operator_counts`: small sizes simulated, the model's sizes
extrapolated exactly) and timed by the timing model (:func:`tsar.sim.timing.predict.predict`) at
the model's thread count: the same method as the BitLinear kernels. Both sides of a comparison run
the same operator code, except the activation quantization: a T-SAR kernel quantizes its input
inside (its counts hold it), a native baseline's modelled core does not (``natives_only``).

Per decoded token at context length ``C`` (the token attends to ``C`` positions, itself included):

* ``embedding``: one float16 row of ``hidden`` values read and widened;
* ``rmsnorm``: two per layer (attention and FFN inputs), the sub-norms where the model has them
  (``hidden`` before the O projection, ``intermediate`` before the down projection), the final norm;
* ``quantize`` (natives only): the four BitLinear inputs of each layer (QKV, O, gate/up, down);
* ``rope``: the query and key heads of each layer;
* ``attention``: per layer, the new K/V rows stored in the float16 cache, scores over ``C`` rows,
  softmax, the value sum; the cache of every layer is the footprint its rows come from;
* ``ffn_act``: ``intermediate`` values per layer (relu^2 or SiLU, times the up projection);
* ``lm_head``: ``vocab x hidden`` float16 weights times the final hidden state (tied or not, the
  same bytes);
* ``sampling``: the argmax over ``vocab`` logits.

A prefill of ``N`` tokens from an empty cache runs the per-token operators ``N`` times, its
attention over ``1..N`` positions (``N`` times the cost at the mean context, rounded to the
operator's multiple of 8; the cost is affine in the context) with one layer's prompt K/V as the
footprint its rows come from (a layer's tokens re-read the rows its projections just wrote; the
layers run one after another), and the LM head and sampling once (only the last position's logits
are needed, as llama.cpp computes them).
"""

from __future__ import annotations

from dataclasses import dataclass

from tsar.models import PREFILL_TOKENS, ModelConfig
from tsar.sim.platforms import Platform

DEFAULT_CONTEXT = 1024
"""Context length (positions attended to) of a decoded token unless given (``--context``)."""
FFN_KINDS = {"relu2": 0, "silu": 1}
"""``ffn_act`` of a model -> the operator's ``kind``."""


@dataclass(frozen=True)
class OperatorTime:
    """One operator's modelled time in a whole model: per decoded token and for the whole prefill."""

    op: str
    decode_seconds: float
    prefill_seconds: float
    natives_only: bool = False

    def seconds(self, phase: str) -> float:
        return self.decode_seconds if phase == "decode" else self.prefill_seconds


def _round8(n: float) -> int:
    return max(8, round(n / 8) * 8)


def operator_calls(cfg: ModelConfig, context: int
                   ) -> list[tuple[str, dict[str, int], int, int, float | None]]:
    """``(op, size, calls per decoded token, calls per prefill of PREFILL_TOKENS, footprint bytes of
    its big data or None)`` for every operator call of ``cfg`` (see the module doc)."""
    hd, heads, kv = cfg.dim_head, cfg.heads, cfg.n_kv_heads
    layers, hidden, inter, n = cfg.layers, cfg.hidden, cfg.intermediate, PREFILL_TOKENS
    kv_cache = layers * 2 * kv * hd * 2.0 * context  # bytes of every layer's K and V rows (float16)
    norms = 2 * layers + 1 + layers * cfg.sub_norms  # of hidden values
    attention = {"heads": heads, "kv_heads": kv, "hd": hd}
    calls = [
        ("embedding", {"n": hidden}, 1, n, None),
        ("rmsnorm", {"n": hidden}, norms, norms * n, None),
        ("quantize", {"n": hidden}, 3 * layers, 3 * layers * n, None),
        ("quantize", {"n": inter}, layers, layers * n, None),
        ("rope", {"heads": heads + kv, "hd": hd}, layers, layers * n, None),
        ("attention", {**attention, "ctx": _round8(context)}, layers, 0, kv_cache),
        ("attention", {**attention, "ctx": _round8((n + 1) / 2)}, 0, layers * n,
         kv_cache / context * n / layers),
        ("ffn_act", {"n": inter, "kind": FFN_KINDS[cfg.ffn_act]}, layers, layers * n, None),
        ("lm_head", {"m": cfg.vocab, "k": hidden}, 1, 1, cfg.vocab * hidden * cfg.head_bits / 8),
        ("sampling", {"n": -(-cfg.vocab // 8) * 8}, 1, 1, None),  # (logits padded to the vector width)
    ]
    if cfg.sub_norms:
        calls.append(("rmsnorm", {"n": inter}, layers, layers * n, None))
    return calls


def operator_times(cfg: ModelConfig, plat: Platform, threads: int, context: int = DEFAULT_CONTEXT
                   ) -> tuple[OperatorTime, ...]:
    """Every operator's modelled time in ``cfg`` on ``plat`` at ``threads`` threads, in
    :data:`tsar.simulate.operators.OPERATORS` order."""
    from tsar.sim.timing.predict import predict
    from tsar.simulate.operators import OPERATORS, operator_counts

    decode: dict[str, float] = dict.fromkeys(OPERATORS, 0.0)
    prefill: dict[str, float] = dict.fromkeys(OPERATORS, 0.0)
    for op, size, per_token, per_prefill, footprint in operator_calls(cfg, context):
        c = operator_counts(op, **size)
        seconds = predict(c.stats, c.code, c.code_address, plat, threads=threads,
                          streams=c.data_streams(footprint)).seconds
        decode[op] += per_token * seconds
        prefill[op] += per_prefill * seconds
    return tuple(OperatorTime(op, decode[op], prefill[op], op == "quantize") for op in OPERATORS)
