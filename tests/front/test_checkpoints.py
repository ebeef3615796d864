"""The GGUF checkpoint reader (tsar.checkpoints) on tiny files written with the ``gguf`` package."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from gguf import GGMLQuantizationType
from gguf.quants import quantize
from gguf_files import (
    CONTEXT,
    HEAD_DIM,
    HEADS,
    HIDDEN,
    I2_S,
    INTERMEDIATE,
    KV_HEADS,
    LAYERS,
    LINEARS,
    MERGES,
    TOKENS,
    VOCAB,
    write_bitnet,
)

from tsar.checkpoints import Checkpoint, Ternary, load, type_name
from tsar.errors import UserError
from tsar.kernels.formats import i2s, tq2_0
from tsar.models import LinearShape

TERNARY_TYPES = ("I2_S", "TQ1_0", "TQ2_0", "F32", "F16", "BF16")


def one_line_error(path: Path, match: str, *names: str) -> str:
    """Load ``path``, expecting a one-line UserError matching ``match`` that names ``path`` and
    each of ``names``."""
    with pytest.raises(UserError, match=match) as info:
        load(path)
    message = str(info.value)
    assert "\n" not in message
    assert str(path) in message
    for name in names:
        assert name in message, message
    return message


def check_ternaries(ck: Checkpoint, expected: dict, source: str) -> None:
    for i, block in enumerate(ck.blocks):
        for role, (m, k) in LINEARS.items():
            name = f"blk.{i}.{role}.weight"
            t = block[role]
            assert isinstance(t, Ternary)
            assert (t.name, t.source, t.w_t.dtype, t.w_t.shape) == (name, source, np.int8, (m, k))
            w_t, scale = expected["ternary"][name]
            np.testing.assert_array_equal(t.w_t, w_t)
            assert t.scale == scale


def test_hyper_parameters(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path)
    h = load(path).hyper
    assert (h.arch, h.vocab, h.hidden, h.intermediate, h.layers) == ("bitnet-b1.58", VOCAB, HIDDEN,
                                                                      INTERMEDIATE, LAYERS)
    assert (h.heads, h.kv_heads, h.head_dim, h.context_length) == (HEADS, KV_HEADS, HEAD_DIM, CONTEXT)
    assert h.rope_theta == 500000.0
    assert h.rms_eps == pytest.approx(1e-6)
    assert (h.ffn_act, h.rope_neox, h.sub_norms) == ("relu2", True, True)
    assert (h.bos, h.eos, h.tokenizer) == (1, 2, "gpt2")
    assert h.tokens == tuple(TOKENS) and h.merges == tuple(MERGES)
    shapes = {s.name: (s.m, s.k) for s in h.model_config("tiny").layer_shapes()}
    assert shapes == {"qkv": ((HEADS + 2 * KV_HEADS) * HEAD_DIM, HIDDEN), "o": (HIDDEN, HEADS * HEAD_DIM),
                      "gate": (INTERMEDIATE, HIDDEN), "up": (INTERMEDIATE, HIDDEN),
                      "down": (HIDDEN, INTERMEDIATE)}
    assert isinstance(h.model_config("tiny").layer_shapes()[0], LinearShape)
    assert "tok0" not in repr(h)  # the vocabulary stays out of the repr


@pytest.mark.parametrize("ternary_type", TERNARY_TYPES)
def test_ternary_weights_and_scales(tmp_path: Path, ternary_type: str) -> None:
    path = tmp_path / "m.gguf"
    expected = write_bitnet(path, ternary_type=ternary_type)
    ck = load(path)
    check_ternaries(ck, expected, ternary_type)
    for i, block in enumerate(ck.blocks):  # scales as the format can store them
        for role in LINEARS:
            scale = expected["ternary"][f"blk.{i}.{role}.weight"][1]
            cast = np.float32 if ternary_type in ("I2_S", "F32") else np.float16
            if ternary_type != "BF16":
                assert float(cast(scale)) == scale
            assert block[role].scale == scale
    assert ck.types() == dict(Counter(expected["types"].values()))
    assert ck.types()[ternary_type] >= LAYERS * len(LINEARS)


@pytest.mark.parametrize("ternary_type", ["F32", "F16", "BF16"])
def test_float_weights_are_ternarized(tmp_path: Path, ternary_type: str) -> None:
    path = tmp_path / "m.gguf"
    expected = write_bitnet(path, ternary_type=ternary_type, ternary_values=False)
    check_ternaries(load(path), expected, ternary_type)


def test_float_ternary_values_keep_their_scale(tmp_path: Path) -> None:
    """Float weights already in {-s, 0, s} (BitNet's converters) give s, not mean|W|."""
    path = tmp_path / "m.gguf"
    expected = write_bitnet(path, ternary_type="F32")
    t = load(path).blocks[0]["attn_q"]
    w_t, scale = expected["ternary"]["blk.0.attn_q.weight"]
    assert t.scale == scale and np.abs(w_t).mean() < 0.9  # absmean would be smaller


@pytest.mark.parametrize("head_type", ["F16", "Q8_0", "F32", "BF16", "Q4_0", "I2_S"])
def test_tied_head_dequantized(tmp_path: Path, head_type: str) -> None:
    path = tmp_path / "m.gguf"
    expected = write_bitnet(path, head_type=head_type)
    ck = load(path)
    assert ck.output is None and ck.head_type == head_type
    assert ck.token_embd.dtype == np.float32 and ck.token_embd.shape == (VOCAB, HIDDEN)
    np.testing.assert_array_equal(ck.token_embd, expected["stored"]["token_embd.weight"])
    if head_type != "I2_S":
        tol = {"F32": 0, "F16": 5e-5, "BF16": 4e-4, "Q8_0": 1e-3, "Q4_0": 1e-2}[head_type]
        np.testing.assert_allclose(ck.token_embd, expected["original"]["token_embd.weight"], atol=tol)
    np.testing.assert_array_equal(ck.output_norm, expected["original"]["output_norm.weight"])


def test_norms(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    expected = write_bitnet(path)
    ck = load(path)
    for i, block in enumerate(ck.blocks):
        assert set(block) == {*LINEARS, "attn_norm", "ffn_norm", "attn_sub_norm", "ffn_sub_norm"}
        for role in ("attn_norm", "ffn_norm", "attn_sub_norm", "ffn_sub_norm"):
            vec = block[role]
            assert isinstance(vec, np.ndarray) and vec.dtype == np.float32
            np.testing.assert_array_equal(vec, expected["original"][f"blk.{i}.{role}.weight"])
    assert ck.blocks[0]["ffn_sub_norm"].shape == (INTERMEDIATE,)


def test_llama_untied_head_and_defaults(tmp_path: Path) -> None:
    path = tmp_path / "llama.gguf"
    expected = write_bitnet(path, arch="llama", tied=False, head_type="Q8_0", embd_type="F16",
                            ternary_type="TQ2_0",
                            drop_keys=["{arch}.rope.freq_base", "{arch}.attention.layer_norm_rms_epsilon",
                                       "{arch}.vocab_size", "tokenizer.ggml.bos_token_id"])
    ck = load(path)
    h = ck.hyper
    assert (h.arch, h.ffn_act, h.rope_neox, h.sub_norms) == ("llama", "silu", False, False)
    assert (h.rope_theta, h.rms_eps, h.kv_heads, h.vocab, h.bos) == (10000.0, 1e-5, KV_HEADS, VOCAB, None)
    assert ck.head_type == "Q8_0" and ck.output is not None
    np.testing.assert_array_equal(ck.output, expected["stored"]["output.weight"])
    np.testing.assert_allclose(ck.output, expected["original"]["output.weight"], atol=1e-3)
    np.testing.assert_array_equal(ck.token_embd, expected["stored"]["token_embd.weight"])
    assert "attn_sub_norm" not in ck.blocks[0]
    assert ck.types() == {"TQ2_0": 14, "F32": 5, "F16": 1, "Q8_0": 1}
    assert ck.types() == dict(Counter(expected["types"].values()))


def test_llama_gqa(tmp_path: Path) -> None:
    path = tmp_path / "llama.gguf"
    expected = write_bitnet(path, arch="llama", tied=False, ternary_type="I2_S")
    ck = load(path)
    assert ck.hyper.kv_heads == KV_HEADS and ck.blocks[0]["attn_k"].w_t.shape == (KV_HEADS * HEAD_DIM, HIDDEN)
    check_ternaries(ck, expected, "I2_S")


def test_upstream_bitnet_scale_tensor(tmp_path: Path) -> None:
    """Arch ``bitnet`` may carry ``blk.N.attn_q.scale`` (upstream llama.cpp multiplies by it)."""
    path = tmp_path / "m.gguf"
    expected = write_bitnet(path, arch="bitnet", extra={"blk.1.attn_q.scale": np.array([2.5], np.float32)},
                            keys={"bitnet.rope.scaling.type": "linear", "bitnet.rope.scaling.factor": 1.0})
    ck = load(path)
    assert ck.hyper.ffn_act == "silu" and ck.hyper.rope_neox
    assert ck.blocks[1]["attn_q"].scale == expected["ternary"]["blk.1.attn_q.weight"][1] * 2.5
    assert ck.blocks[0]["attn_q"].scale == expected["ternary"]["blk.0.attn_q.weight"][1]


def test_type_name() -> None:
    assert [type_name(i) for i in (36, 38, 39, 35, 34, 1, 8, 1000)] == [
        "I2_S", "TL1", "TL2", "TQ2_0", "TQ1_0", "F16", "Q8_0", "type 1000"]


# --- bad input: one-line UserErrors ------------------------------------------------------------

def test_not_gguf(tmp_path: Path) -> None:
    path = tmp_path / "x.gguf"
    path.write_bytes(b"hello, this is not a model")
    one_line_error(path, "not a GGUF file")
    path.write_bytes(b"")
    one_line_error(path, "not a GGUF file")
    one_line_error(tmp_path / "missing.gguf", "no such file")


def test_truncated_data(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path)
    data = path.read_bytes()
    path.write_bytes(data[:-1000])
    one_line_error(path, "truncated: tensor 'blk.1.ffn_down.weight'", "needs bytes")


def test_truncated_header(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path)
    data = path.read_bytes()
    for size in (6, 30, 200, 2000):
        path.write_bytes(data[:size])
        one_line_error(path, "truncated")


def test_bad_version(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path)
    data = bytearray(path.read_bytes())
    data[4:8] = (7).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    one_line_error(path, "GGUF version 7 is not supported")
    data[4:8] = (3).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    one_line_error(path, "big-endian")


def test_missing_tensor(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, drop=["blk.1.ffn_up.weight"])
    one_line_error(path, "missing tensor 'blk.1.ffn_up.weight'")
    write_bitnet(path, drop=["blk.1.attn_sub_norm.weight"])
    one_line_error(path, "missing tensor 'blk.1.attn_sub_norm.weight'")


def test_missing_key(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, drop_keys=["{arch}.block_count"])
    one_line_error(path, "missing metadata key 'bitnet-b1.58.block_count'")


def test_bad_key_value(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, keys={"bitnet-b1.58.attention.head_count_kv": 3})
    one_line_error(path, "head_count 4 is not a multiple of head_count_kv 3")
    write_bitnet(path, keys={"tokenizer.ggml.eos_token_id": VOCAB})
    one_line_error(path, "'tokenizer.ggml.eos_token_id' = 300 is not a token id below 300")
    write_bitnet(path, keys={"tokenizer.ggml.tokens": TOKENS[:-1]})
    one_line_error(path, "has 299 tokens but 'bitnet-b1.58.vocab_size' is 300")


def test_rope_scaling_rejected(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, arch="llama",
                 keys={"llama.rope.scaling.type": "linear", "llama.rope.scaling.factor": 4.0})
    one_line_error(path, "'llama.rope.scaling.factor' = 4.0: RoPE scaling is not supported")
    write_bitnet(path, arch="llama", keys={"llama.rope.scaling.type": "yarn"})
    one_line_error(path, "'llama.rope.scaling.type' = 'yarn'")
    write_bitnet(path, arch="llama", extra={"rope_freqs.weight": np.ones(HEAD_DIM // 2, np.float32)})
    one_line_error(path, "unexpected tensor 'rope_freqs.weight'")


def test_unsupported_architecture(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, arch="gpt2")
    one_line_error(path, "architecture 'gpt2' is not supported")


def test_shape_mismatch(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, keys={"bitnet-b1.58.feed_forward_length": 1024})
    one_line_error(path, re.escape("tensor 'blk.0.ffn_sub_norm.weight' has shape [512]"), "1024")
    write_bitnet(path, drop_keys=["{arch}.attention.head_count_kv"])
    one_line_error(path, re.escape("tensor 'blk.0.attn_k.weight' has shape [256, 128]"),
                   "expected [256, 256]", "kv heads 4")


@pytest.mark.parametrize("bad_type", ["Q4_0", "Q8_0"])
def test_unsupported_bitlinear_type(tmp_path: Path, bad_type: str) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, types={"blk.0.attn_q.weight": bad_type})
    one_line_error(path, f"type {bad_type} is not supported for a BitLinear matrix", "'blk.0.attn_q.weight'")


def test_unknown_type_id(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    m, k = LINEARS["ffn_up"]
    write_bitnet(path, raw={"blk.1.ffn_up.weight": (1000, np.zeros(m * k // 4, np.uint8))})
    one_line_error(path, "type 1000 is not supported", "'blk.1.ffn_up.weight'")


def test_tl2_rejected(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    m, k = LINEARS["attn_v"]
    write_bitnet(path, raw={"blk.0.attn_v.weight": (39, np.zeros(m * k // 4, np.uint8))})
    one_line_error(path, "TL2 tensors are not supported", "'blk.0.attn_v.weight'")


def test_unexpected_tensor(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, extra={"blk.0.attn_q.bias": np.zeros(HEADS * HEAD_DIM, np.float32)})
    one_line_error(path, "unexpected tensor 'blk.0.attn_q.bias': biases are not supported")


def test_tq2_0_with_different_block_scales(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    m, k = LINEARS["ffn_down"]  # 2 blocks a row
    w_t = np.random.default_rng(1).integers(-1, 2, (m, k)).astype(np.int8)
    blocks = tq2_0.pack(w_t, 0.5).data.reshape(m, k // 256, 66).copy()
    blocks[3, 1, 64:66] = np.array([0.25], np.float16).view(np.uint8)
    write_bitnet(path, ternary_type="TQ2_0",
                 raw={"blk.1.ffn_down.weight": (int(GGMLQuantizationType.TQ2_0), blocks.reshape(-1))})
    one_line_error(path, "blocks carry different scales", "'blk.1.ffn_down.weight'", "row 3 block 1",
                   "per-block scales are not a BitNet tensor")


def test_i2s_code_3(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    m, k = LINEARS["attn_output"]
    w_t = np.random.default_rng(2).integers(-1, 2, (m, k)).astype(np.int8)
    data = i2s.pack(w_t, 0.1).data.copy()
    data[k // 4 + 5] |= 0b11000000  # row 1 (k // 4 bytes a row), column 5: code 3
    write_bitnet(path, raw={"blk.0.attn_output.weight": (I2_S, data)})
    one_line_error(path, "code 3 at row 1, column 5 is not a ternary value", "'blk.0.attn_output.weight'",
                   "I2_S")


def test_i2s_truncated_tail(tmp_path: Path) -> None:
    """An I2_S tensor without its 32-byte tail, last in the file, runs past the end."""
    path = tmp_path / "m.gguf"
    write_bitnet(path)
    data = path.read_bytes()
    path.write_bytes(data[:-8])
    one_line_error(path, "truncated: tensor")


def test_tq2_0_code_3(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    m, k = LINEARS["ffn_down"]
    w_t = np.random.default_rng(3).integers(-1, 2, (m, k)).astype(np.int8)
    data = quantize(w_t.astype(np.float32) * np.float32(0.5), GGMLQuantizationType.TQ2_0).reshape(-1)
    data[0] |= 0b11
    write_bitnet(path, ternary_type="TQ2_0",
                 raw={"blk.0.ffn_down.weight": (int(GGMLQuantizationType.TQ2_0), data)})
    one_line_error(path, "code 3 at row 0, column 0", "'blk.0.ffn_down.weight'", "TQ2_0")


def test_non_finite_float_weights(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    m, k = LINEARS["ffn_up"]
    x = np.zeros((m, k), np.float16)
    x[2, 2] = np.inf
    write_bitnet(path, ternary_type="F16", raw={"blk.0.ffn_up.weight": (1, x.view(np.uint8).reshape(-1))})
    one_line_error(path, "non-finite values", "'blk.0.ffn_up.weight'")
