"""Tiny BitNet-style GGUF files for the checkpoint reader's tests, written with the ``gguf`` package.

The model: 2 layers, hidden 256, intermediate 512, 4 heads, 2 KV heads, head_dim 64, vocab 300, with
the tensor names of llama.cpp's bitnet-b1.58 / llama architectures. bitnet.cpp's I2_S (type id 36,
unknown to ``gguf``) is written as an int8 view of the bytes of :func:`tsar.kernels.formats.i2s.pack`
with ``raw_dtype=36`` and ``raw_shape=(M, K)``: the writer then stores the bytes verbatim. TL2 (id 39)
is written as bitnet.cpp's converter writes it: the bytes of :func:`tsar.kernels.formats.tl2.pack` at
the (bm, bk) of the matrix's shape, then ``<name>_scale``, its scale as a 0-dimensional F32 tensor;
:func:`write_kernel_config` writes the ``kernel_config.ini`` that gives those (bm, bk).
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
from gguf import GGMLQuantizationType, GGUFWriter
from gguf.quants import dequantize, quantize

from tsar.kernels.formats import i2s, tl2
from tsar.kernels.quant import ternarize

HIDDEN, INTERMEDIATE, LAYERS, HEADS, KV_HEADS, HEAD_DIM, VOCAB, CONTEXT = 256, 512, 2, 4, 2, 64, 300, 128
I2_S, TL2 = 36, 39
LINEARS = {  # role: (M, K)
    "attn_q": (HEADS * HEAD_DIM, HIDDEN),
    "attn_k": (KV_HEADS * HEAD_DIM, HIDDEN),
    "attn_v": (KV_HEADS * HEAD_DIM, HIDDEN),
    "attn_output": (HIDDEN, HEADS * HEAD_DIM),
    "ffn_gate": (INTERMEDIATE, HIDDEN),
    "ffn_up": (INTERMEDIATE, HIDDEN),
    "ffn_down": (HIDDEN, INTERMEDIATE),
}
NORMS = {"attn_norm": HIDDEN, "ffn_norm": HIDDEN}
SUB_NORMS = {"attn_sub_norm": HIDDEN, "ffn_sub_norm": INTERMEDIATE}
TOKENS = [f"tok{i}" for i in range(VOCAB)]
MERGES = ["t o", "to k", "tok 1"]


TL2_BLOCKS = {  # (M, K): (bm, bk); K 256 leaves a 64-weight 2-weight tail at bk 96 and 192, K 512 32
    LINEARS["attn_q"]: (128, 96),
    LINEARS["attn_k"]: (32, 192),
    LINEARS["ffn_up"]: (256, 96),
    LINEARS["ffn_down"]: (64, 96),
}
"""The TL2 blocks of the tiny model's five shapes (attn_v and attn_output share theirs)."""


def write_kernel_config(path: str | Path, blocks: dict[tuple[int, int], tuple[int, int]],
                        bmm: int = 32) -> Path:
    """A bitnet.cpp ``kernel_config.ini``: one ``[Kernels_i]`` section per (M, K): (bm, bk)."""
    sections = [f"[Kernels_{i}]\nm = {m}\nk = {k}\nbm = {bm}\nbk = {bk}\nbmm = {bmm}\n"
                for i, ((m, k), (bm, bk)) in enumerate(blocks.items())]
    Path(path).write_text("\n".join(sections))
    return Path(path)


def metadata(arch: str) -> dict[str, Any]:
    """The metadata :func:`write_bitnet` writes by default (keys without the ``general.`` ones)."""
    return {
        f"{arch}.context_length": CONTEXT,
        f"{arch}.embedding_length": HIDDEN,
        f"{arch}.block_count": LAYERS,
        f"{arch}.feed_forward_length": INTERMEDIATE,
        f"{arch}.attention.head_count": HEADS,
        f"{arch}.attention.head_count_kv": KV_HEADS,
        f"{arch}.rope.dimension_count": HEAD_DIM,
        f"{arch}.rope.freq_base": 500000.0,
        f"{arch}.attention.layer_norm_rms_epsilon": 1e-6,
        f"{arch}.vocab_size": VOCAB,
        "tokenizer.ggml.model": "gpt2",
        "tokenizer.ggml.tokens": TOKENS,
        "tokenizer.ggml.merges": MERGES,
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
    }


def _add_key(w: GGUFWriter, key: str, value: Any) -> None:
    if isinstance(value, str):
        w.add_string(key, value)
    elif isinstance(value, float):
        w.add_float32(key, value)
    elif isinstance(value, int):
        w.add_uint32(key, value)
    else:
        w.add_array(key, list(value))


def encode(x: np.ndarray, type_name: str) -> tuple[np.ndarray, int | None, tuple[int, ...] | None]:
    """Float32 ``x`` -> (array to write, raw_dtype, raw_shape) for ``GGUFWriter.add_tensor``."""
    if type_name == "F32":
        return x.astype(np.float32), None, None
    if type_name == "F16":
        return x.astype(np.float16), None, None
    if type_name == "I2_S":
        w_t, scale = ternarize(x.astype(np.float32))
        return i2s.pack(w_t, scale).data.view(np.int8), I2_S, x.shape
    qtype = GGMLQuantizationType[type_name]
    return quantize(x.astype(np.float32), qtype), qtype, None


def stored(x: np.ndarray, type_name: str) -> np.ndarray:
    """What a reader should get back for float32 ``x`` written as ``type_name``."""
    data, raw_dtype, _ = encode(x, type_name)
    if type_name == "I2_S":
        w_t, scale = ternarize(x.astype(np.float32))
        return w_t.astype(np.float32) * np.float32(scale)
    if raw_dtype is None:
        return data.astype(np.float32)
    return dequantize(data, GGMLQuantizationType[type_name]).astype(np.float32)


def write_bitnet(path: str | Path, *, ternary_type: str = "I2_S", head_type: str = "F16",
                 embd_type: str | None = None, tied: bool = True, arch: str = "bitnet-b1.58",
                 seed: int = 0, sub_norms: bool | None = None, ternary_values: bool = True,
                 types: dict[str, str] | None = None, raw: dict[str, tuple[int, np.ndarray]] | None = None,
                 drop: Iterable[str] = (), drop_keys: Iterable[str] = (),
                 keys: dict[str, Any] | None = None, extra: dict[str, np.ndarray] | None = None,
                 tl2_blocks: dict[tuple[int, int], tuple[int, int]] | None = None,
                 ) -> dict[str, Any]:
    """Write a tiny checkpoint; return what a reader should find.

    ``ternary_type``: the type of every BitLinear matrix ("I2_S", "TL2", "TQ1_0", "TQ2_0", "F32",
    "F16", "BF16"; any ``gguf`` type can be forced per tensor with ``types``); TL2 packs each (M, K)
    with the (bm, bk) of ``tl2_blocks`` (default :data:`TL2_BLOCKS`) and adds ``<name>_scale``. The LM head is
    ``token_embd.weight`` (type ``embd_type``, default ``head_type``) when ``tied``, else a separate
    ``output.weight`` of ``head_type``. ``ternary_values=False`` writes random (non-ternary) floats
    for float-typed matrices. ``raw`` writes a tensor's bytes verbatim with a type id, ``drop`` leaves
    tensors out, ``drop_keys``/``keys`` remove/override metadata, ``extra`` adds float32 tensors (one
    named ``<name>_scale`` replaces the scale a TL2 matrix ``<name>`` gets).

    Returns ``{"original": {name: float32}, "stored": {name: float32 as a reader dequantizes it},
    "ternary": {name: (int8 w_t (M, K), scale)}, "types": {name: type name}}``.
    """
    rng = np.random.default_rng(seed)
    sub_norms = arch != "llama" if sub_norms is None else sub_norms
    types = dict(types or {})
    raw = dict(raw or {})
    embd_type = embd_type or head_type
    out: dict[str, Any] = {"original": {}, "stored": {}, "ternary": {}, "types": {}}
    tensors: dict[str, tuple[np.ndarray, str]] = {}  # name: (float32 original, type)
    ternary: dict[str, tuple[np.ndarray, float]] = {}

    tensors["token_embd.weight"] = (rng.normal(0, 0.02, (VOCAB, HIDDEN)).astype(np.float32), embd_type)
    if not tied:
        tensors["output.weight"] = (rng.normal(0, 0.02, (VOCAB, HIDDEN)).astype(np.float32), head_type)
    tensors["output_norm.weight"] = ((1 + 0.1 * rng.normal(size=HIDDEN)).astype(np.float32), "F32")
    for i in range(LAYERS):
        norms = NORMS | (SUB_NORMS if sub_norms else {})
        for role, n in norms.items():
            tensors[f"blk.{i}.{role}.weight"] = ((1 + 0.1 * rng.normal(size=n)).astype(np.float32), "F32")
        for role, (m, k) in LINEARS.items():
            name = f"blk.{i}.{role}.weight"
            w_t = rng.integers(-1, 2, (m, k)).astype(np.int8)
            scale = float(rng.uniform(0.01, 0.1))
            ternary[name] = (w_t, scale)
            if ternary_values or ternary_type not in ("F32", "F16", "BF16"):
                x = w_t.astype(np.float32) * np.float32(scale)
            else:
                x = rng.normal(0, 0.05, (m, k)).astype(np.float32)
            tensors[name] = (x, ternary_type)
    for name, x in (extra or {}).items():
        tensors[name] = (x.astype(np.float32), "F32")

    w = GGUFWriter(str(path), arch=arch)
    meta = metadata(arch) | (keys or {})
    for key in drop_keys:
        meta.pop(key.format(arch=arch), None)
    for key, value in meta.items():
        _add_key(w, key, value)
    for name, (x, type_name) in tensors.items():
        if name in drop:
            continue
        type_name = types.get(name, type_name)
        out["original"][name] = x
        out["types"][name] = type_name
        if name in ternary and type_name == "TL2":
            w_t, scale = ternary[name]
            bm, bk = (tl2_blocks or TL2_BLOCKS)[w_t.shape]
            data = raw[name][1] if name in raw else tl2.pack(w_t, bm, bk).data
            w.add_tensor(name, np.asarray(data, np.uint8).view(np.int8), raw_shape=x.shape, raw_dtype=TL2)
            if f"{name}_scale" not in (*drop, *(extra or {})):  # a numpy scalar, as bitnet.cpp's converter
                w.add_tensor(f"{name}_scale", np.float32(scale))
                out["types"][f"{name}_scale"] = "F32"
            out["stored"][name] = w_t.astype(np.float32) * np.float32(scale)
            out["ternary"][name] = (w_t, float(np.float32(scale)))
            continue
        if name in raw:
            type_id, data = raw[name]
            w.add_tensor(name, np.asarray(data, np.uint8).view(np.int8), raw_shape=x.shape, raw_dtype=type_id)
            continue
        if name in ternary and type_name == "I2_S":
            w_t, scale = ternary[name]
            w.add_tensor(name, i2s.pack(w_t, scale).data.view(np.int8), raw_shape=x.shape, raw_dtype=I2_S)
            out["stored"][name] = w_t.astype(np.float32) * np.float32(scale)
            out["ternary"][name] = (w_t, float(np.float32(scale)))
            continue
        data, raw_dtype, raw_shape = encode(x, type_name)
        w.add_tensor(name, data, raw_shape=raw_shape, raw_dtype=raw_dtype)
        s = stored(x, type_name)
        out["stored"][name] = s
        if name in ternary:
            out["ternary"][name] = (ternary[name][0], float(np.abs(s).max())) if ternary_values \
                else ternarize(s)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return out
