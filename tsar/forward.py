"""A checkpoint's forward pass on the host: a prompt in, greedy tokens out, every operator timed.

Per transformer layer, as llama.cpp and bitnet.cpp build BitNet b1.58 and Llama graphs:

    h = RMSNorm(x) * attn_norm
    q, k, v = BitLinear_q(h), BitLinear_k(h), BitLinear_v(h);  RoPE(q, k) at the token positions
    a = attention(q, K/V cache)      (grouped-query; the cache in float16, as the runtimes keep it)
    x = x + BitLinear_o(RMSNorm(a) * attn_sub_norm if the checkpoint has sub-norms else a)
    h = RMSNorm(x) * ffn_norm
    f = act(BitLinear_gate(h)) * BitLinear_up(h)     (act: relu^2 for BitNet b1.58, SiLU otherwise)
    x = x + BitLinear_down(RMSNorm(f) * ffn_sub_norm if sub-norms else f)

then ``RMSNorm(x) * output_norm``, the LM head (``output``, or the tied ``token_embd``) in float32
from the precision it is stored in, and greedy sampling (argmax; deterministic, so kernels compare
token for token). A prompt is prefilled in one pass of all its tokens (GEMM), then each new token
is one pass of one token (GEMV).

**BitLinear** is a kernel's: int8 per-token absmax activations, the exact integer product with the
ternary weights and one float32 dequantization (:mod:`tsar.kernels.quant`). Every backend computes
exactly these operations (the reference in numpy, the native baselines in C, the T-SAR kernels'
machine code through the native engine), so every backend gives bit-identical outputs, logits and
tokens; :func:`compare_kernels` checks that on the prompt given.

Times are wall seconds on the host per operator (:data:`OPERATORS`), BitLinear per matrix kind;
the T-SAR kernels' times are those of the native engine (T-SAR instructions emulated by helpers),
not of a T-SAR CPU: the timing model predicts those (``tsar compare --model``).
"""

from __future__ import annotations

import math
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from tsar.checkpoints import LINEARS, Checkpoint, Ternary
from tsar.errors import UserError
from tsar.frames import Tabular
from tsar.kernels import reference
from tsar.simulate.operators import OPERATORS as TOKEN_OPERATORS

OPERATORS = tuple("bitlinear" if op == "quantize" else op for op in TOKEN_OPERATORS)
"""The operators of a token, in the order they first run: the modelled ones
(:data:`tsar.simulate.operators.OPERATORS`), the activation quantization timed with the BitLinear
matrices (every backend quantizes inside its call)."""
REFERENCE = "reference"
"""The numpy BitLinear (:func:`tsar.kernels.reference.bitlinear`)."""

Linear = Callable[[np.ndarray], np.ndarray]
"""float32 (N, K) activations -> float32 (N, M) outputs."""


# --- BitLinear backends ----------------------------------------------------------------------------
def _native(label: str, threads: int) -> Callable[[Ternary], Linear]:
    from tsar.kernels.baselines import prepare

    name, _, isa = label.partition("-")
    isa = isa or "avx2"

    def make(t: Ternary) -> Linear:
        try:
            kernel = prepare(name, t.w_t, t.scale or 1.0)
        except ValueError as exc:
            m, k = t.w_t.shape
            raise UserError(f"{t.name}: {label} cannot take {m} x {k}: {exc}") from None
        return lambda x: kernel.matmul(x, threads, isa)
    return make


def _tsar(kernel: str) -> Callable[[Ternary], Linear]:
    from tsar.kernels.formats.tsar import pack_weights
    from tsar.kernels.tsar_codegen import function_name
    from tsar.sim import create_machine
    from tsar.simulate.tsar_kernel import plan_for, program_for

    machine = create_machine("native")
    entries: dict[tuple[int, int], tuple] = {}

    def make(t: Ternary) -> Linear:
        m, k = t.w_t.shape
        if (m, k) not in entries:
            try:
                plan = plan_for(kernel, m, k)
            except ValueError as exc:
                raise UserError(f"{t.name}: {kernel} cannot take {m} x {k}: {exc}") from None
            entries[m, k] = plan, machine.load_program(program_for(plan))[function_name(plan)]
        plan, entry = entries[m, k]
        packed = pack_weights(plan, t.w_t)
        workspace = np.zeros(plan.workspace_bytes, np.uint8)
        scale = np.array([t.scale or 1.0], np.float32)

        def run(x: np.ndarray) -> np.ndarray:
            y = np.zeros((x.shape[0], m), np.float32)
            machine.call(entry, np.ascontiguousarray(x), packed, y, x.shape[0], workspace, scale,
                         returns="none")
            return y
        return run
    return make


def backend(kernel: str, threads: int = 1) -> Callable[[Ternary], Linear]:
    """What makes a :data:`Linear` of a matrix for ``kernel``: ``reference``, a native baseline's
    label (``tl2``, ``i2s-avx512``...; run natively with ``threads``), or a T-SAR kernel (its machine
    code through the native engine)."""
    from tsar.kernels.baselines import ISAS, kernel_isa
    from tsar.kernels.registry import KERNELS
    from tsar.kernels.tsar_plan import KERNEL_PREFIX, kernel_names

    if kernel == REFERENCE:
        return lambda t: (lambda x: reference.bitlinear(x, t.w_t, t.scale or 1.0))
    if kernel.startswith(KERNEL_PREFIX):
        if kernel not in kernel_names():
            raise UserError(f"unknown T-SAR kernel {kernel!r} (known: {', '.join(kernel_names())})")
        return _tsar(kernel)
    name, _, isa = kernel.partition("-")
    if name not in KERNELS or (isa or "avx2") not in ISAS or isa == "auto":
        raise UserError(f"unknown kernel {kernel!r}: {REFERENCE}, a T-SAR kernel or a native baseline "
                        f"({', '.join(KERNELS)}; -avxvnni or -avx512 after it for those levels)")
    if kernel_isa(name, isa or "avx2") != (isa or "avx2"):
        raise UserError(f"{kernel}: this CPU or the kernel lacks the {isa or 'avx2'} level")
    return _native(kernel, threads)


# --- the operators ---------------------------------------------------------------------------------
def rms_norm(x: np.ndarray, weight: np.ndarray, eps: float) -> np.ndarray:
    """``x / sqrt(mean(x^2) + eps) * weight`` per row (float32)."""
    scale = 1.0 / np.sqrt(np.mean(x * x, axis=-1, keepdims=True, dtype=np.float32) + np.float32(eps))
    return (x * scale.astype(np.float32)) * weight


def rope(x: np.ndarray, positions: np.ndarray, theta: float, neox: bool) -> np.ndarray:
    """Rotary position embedding of ``x`` (N, heads, head_dim) at ``positions`` (N,): pairs
    ``(i, i + head_dim/2)`` (NEOX) or ``(2i, 2i + 1)``, rotated by ``pos * theta^(-2i/head_dim)``."""
    hd = x.shape[-1]
    freqs = theta ** (-np.arange(0, hd, 2, dtype=np.float64) / hd)
    angles = positions[:, None].astype(np.float64) * freqs[None, :]
    cos, sin = np.cos(angles).astype(np.float32)[:, None, :], np.sin(angles).astype(np.float32)[:, None, :]
    a, b = (x[..., :hd // 2], x[..., hd // 2:]) if neox else (x[..., 0::2], x[..., 1::2])
    ra, rb = a * cos - b * sin, a * sin + b * cos
    if neox:
        return np.concatenate([ra, rb], axis=-1)
    out = np.empty_like(x)
    out[..., 0::2], out[..., 1::2] = ra, rb
    return out


def attention(q: np.ndarray, keys: np.ndarray, values: np.ndarray, start: int) -> np.ndarray:
    """Causal grouped-query attention of ``q`` (N, heads, hd) at positions ``start..start+N-1`` over
    the cache ``keys``/``values`` (start + N, kv_heads, hd; float16) -> (N, heads * hd) float32."""
    n, heads, hd = q.shape
    kv = keys.shape[1]
    k32, v32 = keys.astype(np.float32), values.astype(np.float32)
    qg = q.reshape(n, kv, heads // kv, hd)
    scores = np.einsum("nkgd,tkd->nkgt", qg, k32) * np.float32(1 / math.sqrt(hd))
    future = np.arange(keys.shape[0])[None, :] > (start + np.arange(n))[:, None]
    scores[np.broadcast_to(future[:, None, None, :], scores.shape)] = -np.inf
    scores -= scores.max(axis=-1, keepdims=True)
    p = np.exp(scores)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("nkgt,tkd->nkgd", p, v32).reshape(n, heads * hd)


def ffn_activation(gate: np.ndarray, up: np.ndarray, kind: str) -> np.ndarray:
    """``relu(gate)^2 * up`` (``relu2``) or ``silu(gate) * up`` (``silu``)."""
    if kind == "relu2":
        r = np.maximum(gate, 0)
        return r * r * up
    return gate / (1 + np.exp(-gate)) * up


# --- the model -------------------------------------------------------------------------------------
@dataclass
class Generation(Tabular):
    """One prompt through one kernel: the tokens, and where the host's time went."""

    kernel: str
    prompt: list[int]
    tokens: list[int]
    text: str
    prefill_seconds: float
    decode_seconds: list[float]
    operators: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    matrices: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    last_logits: np.ndarray | None = None

    @property
    def decode_tokens_per_second(self) -> float | None:
        return len(self.decode_seconds) / sum(self.decode_seconds) if self.decode_seconds else None

    def records(self) -> list[dict]:
        total = sum(self.operators.values()) or 1.0
        return [{"kernel": self.kernel, "operator": op, "seconds": self.operators.get(op, 0.0),
                 "share": self.operators.get(op, 0.0) / total} for op in OPERATORS]

    def table(self) -> str:
        total = sum(self.operators.values()) or 1.0
        rows = [f"{'operator':<10} {'seconds':>9} {'share':>7}"]
        rows += [f"{op:<10} {self.operators.get(op, 0.0):>9.4f} {self.operators.get(op, 0.0) / total:>6.1%}"
                 for op in OPERATORS]
        rows += ["", f"{'BitLinear':<12} {'seconds':>9}"]
        rows += [f"{name:<12} {secs:>9.4f}" for name, secs in self.matrices.items()]
        return "\n".join(rows)


class Model:
    """A checkpoint with its BitLinear matrices prepared for one kernel (:func:`backend`)."""

    def __init__(self, ckpt: Checkpoint, kernel: str = REFERENCE, threads: int = 1,
                 progress: Callable[[str], None] | None = None) -> None:
        self.ckpt, self.kernel, self.hyper = ckpt, kernel, ckpt.hyper
        make = backend(kernel, threads)
        self.linears: list[dict[str, Linear]] = []
        for i, block in enumerate(ckpt.blocks):
            if progress:
                progress(f"{kernel}: preparing layer {i + 1}/{len(ckpt.blocks)}")
            self.linears.append({name: make(block[name]) for name in LINEARS})
        self.head = ckpt.output if ckpt.output is not None else ckpt.token_embd

    def generate(self, prompt: Sequence[int], new_tokens: int, *, stop: int | None = None,
                 context: int | None = None) -> Generation:
        """Greedy decoding of up to ``new_tokens`` tokens after ``prompt`` (ids), stopping after
        ``stop``; the KV cache holds ``context`` positions (default: prompt + new tokens)."""
        h = self.hyper
        if not prompt:
            raise UserError("the prompt has no tokens")
        if bad := [t for t in prompt if not 0 <= t < h.vocab]:
            raise UserError(f"token id {bad[0]} is outside the vocabulary (0..{h.vocab - 1})")
        length = context or len(prompt) + new_tokens
        if len(prompt) + new_tokens > length:
            raise UserError(f"prompt ({len(prompt)}) and new tokens ({new_tokens}) exceed the context "
                            f"({length})")
        shape = (h.layers, length, h.kv_heads, h.head_dim)
        self._keys, self._values = np.zeros(shape, np.float16), np.zeros(shape, np.float16)
        out = Generation(self.kernel, list(prompt), [], "", 0.0, [])
        started = time.perf_counter()
        logits = self._forward(np.asarray(prompt), 0, out)
        token = self._sample(logits, out)
        out.prefill_seconds = time.perf_counter() - started
        out.tokens.append(token)
        while len(out.tokens) < new_tokens and token != stop:
            started = time.perf_counter()
            logits = self._forward(np.asarray([token]), len(prompt) + len(out.tokens) - 1, out)
            token = self._sample(logits, out)
            out.decode_seconds.append(time.perf_counter() - started)
            out.tokens.append(token)
        out.last_logits = logits
        return out

    def _sample(self, logits: np.ndarray, out: Generation) -> int:
        t = time.perf_counter()
        token = int(np.argmax(logits))
        out.operators["sampling"] += time.perf_counter() - t
        return token

    def _forward(self, ids: np.ndarray, start: int, out: Generation) -> np.ndarray:
        """The last position's logits (vocab,) after ``ids`` at positions ``start..``."""
        h, ckpt, ops = self.hyper, self.ckpt, out.operators
        clock = time.perf_counter
        t = clock()
        x = ckpt.token_embd[ids].astype(np.float32)
        ops["embedding"] += clock() - t
        positions = start + np.arange(len(ids))
        end = start + len(ids)

        def linear(layer: int, name: str, a: np.ndarray) -> np.ndarray:
            t = clock()
            y = self.linears[layer][name](np.ascontiguousarray(a, np.float32))
            dt = clock() - t
            ops["bitlinear"] += dt
            out.matrices[name] += dt
            return y

        def norm(a: np.ndarray, weight: np.ndarray) -> np.ndarray:
            t = clock()
            y = rms_norm(a, weight, h.rms_eps)
            ops["rmsnorm"] += clock() - t
            return y

        for i, block in enumerate(ckpt.blocks):
            a = norm(x, block["attn_norm"])
            q, k, v = (linear(i, name, a) for name in ("attn_q", "attn_k", "attn_v"))
            t = clock()
            q = rope(q.reshape(len(ids), h.heads, h.head_dim), positions, h.rope_theta, h.rope_neox)
            k = rope(k.reshape(len(ids), h.kv_heads, h.head_dim), positions, h.rope_theta, h.rope_neox)
            ops["rope"] += clock() - t
            t = clock()
            self._keys[i, start:end] = k
            self._values[i, start:end] = v.reshape(len(ids), h.kv_heads, h.head_dim)
            att = attention(q, self._keys[i, :end], self._values[i, :end], start)
            ops["attention"] += clock() - t
            if "attn_sub_norm" in block:
                att = norm(att, block["attn_sub_norm"])
            x = x + linear(i, "attn_output", att)
            a = norm(x, block["ffn_norm"])
            gate, up = linear(i, "ffn_gate", a), linear(i, "ffn_up", a)
            t = clock()
            f = ffn_activation(gate, up, h.ffn_act)
            ops["ffn_act"] += clock() - t
            if "ffn_sub_norm" in block:
                f = norm(f, block["ffn_sub_norm"])
            x = x + linear(i, "ffn_down", f)
        last = norm(x[-1:], ckpt.output_norm)[0]
        t = clock()
        logits = self.head @ last
        ops["lm_head"] += clock() - t
        if not np.isfinite(logits).all():
            raise UserError(f"{self.kernel}: the logits are not finite (the checkpoint's weights or "
                            "norms overflow float32)")
        return logits


@dataclass
class KernelAgreement:
    """Several kernels on one prompt: each one's generation, and whether all agree."""

    generations: dict[str, Generation]

    @property
    def same_tokens(self) -> bool:
        first = next(iter(self.generations.values()))
        return all(g.tokens == first.tokens for g in self.generations.values())

    def logit_difference(self, kernel: str) -> float:
        """Largest absolute difference of ``kernel``'s last logits from the first kernel's."""
        first = next(iter(self.generations.values()))
        return float(np.max(np.abs(self.generations[kernel].last_logits - first.last_logits)))


def compare_kernels(ckpt: Checkpoint, prompt: Sequence[int], new_tokens: int, kernels: Sequence[str],
                    *, threads: int = 1, stop: int | None = None,
                    progress: Callable[[str], None] | None = None) -> KernelAgreement:
    """The same prompt through every kernel of ``kernels`` (the first is the one compared with)."""
    out = {}
    for kernel in dict.fromkeys(kernels):
        model = Model(ckpt, kernel, threads, progress)
        if progress:
            progress(f"{kernel}: {len(prompt)} prompt tokens, then up to {new_tokens} new")
        out[kernel] = model.generate(prompt, new_tokens, stop=stop)
    return KernelAgreement(out)
