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
    TL2,
    TL2_BLOCKS,
    TOKENS,
    VOCAB,
    write_bitnet,
    write_kernel_config,
)

from tsar.checkpoints import Checkpoint, Ternary, load, type_name
from tsar.cli.main import main
from tsar.errors import UserError
from tsar.forward import REFERENCE, compare_kernels
from tsar.kernels.formats import i2s, tl2, tq2_0
from tsar.models import LinearShape

TERNARY_TYPES = ("I2_S", "TQ1_0", "TQ2_0", "F32", "F16", "BF16")


def one_line_error(path: Path, match: str, *names: str, tl2_config: Path | None = None) -> str:
    """Load ``path``, expecting a one-line UserError matching ``match`` that names ``path`` and
    each of ``names``."""
    with pytest.raises(UserError, match=match) as info:
        load(path, tl2_config=tl2_config)
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


@pytest.mark.parametrize("type_id,name", [(38, "TL1"), (37, "I8_S")])
def test_tl1_and_i8_s_rejected(tmp_path: Path, type_id: int, name: str) -> None:
    path = tmp_path / "m.gguf"
    m, k = LINEARS["attn_v"]
    write_bitnet(path, raw={"blk.0.attn_v.weight": (type_id, np.zeros(m * k // 4, np.uint8))})
    one_line_error(path, f"{name} tensors are not supported", "'blk.0.attn_v.weight'")


def test_id_39_without_tl2_signs_is_mxfp4(tmp_path: Path) -> None:
    """Arch llama, no ``_scale`` companion and MXFP4's size: upstream's MXFP4, not TL2."""
    path = tmp_path / "m.gguf"
    m, k = LINEARS["attn_v"]
    write_bitnet(path, arch="llama", raw={"blk.0.attn_v.weight": (39, np.zeros(m * k // 32 * 17, np.uint8))})
    one_line_error(path, "type MXFP4 is not supported for a BitLinear matrix", "'blk.0.attn_v.weight'")


# --- TL2 (bitnet.cpp, layout from a kernel config) ---------------------------------------------

@pytest.fixture
def tl2_config(tmp_path: Path) -> Path:
    return write_kernel_config(tmp_path / "kernel_config.ini", TL2_BLOCKS)


@pytest.mark.parametrize("arch", ["bitnet-b1.58", "llama"])
def test_tl2_weights_and_scales(tmp_path: Path, tl2_config: Path, arch: str) -> None:
    """TL2 decodes to the written ternary weights, with bm/bk from the config (K 256 and 512 leave
    2-weight tails); ``<name>_scale`` gives the scale exactly as I2_S's tail does, and counts as used."""
    path, i2s_path = tmp_path / "tl2.gguf", tmp_path / "i2s.gguf"
    expected = write_bitnet(path, ternary_type="TL2", arch=arch)
    write_bitnet(i2s_path, ternary_type="I2_S", arch=arch)
    assert all((k % bk) % 32 == 0 and k % bk for (_, k), (_, bk) in TL2_BLOCKS.items())
    ck, same = load(path, tl2_config=tl2_config), load(i2s_path)
    check_ternaries(ck, expected, "TL2")
    for t, u in zip(ck.ternaries(), same.ternaries(), strict=True):
        np.testing.assert_array_equal(t.w_t, u.w_t)
        assert t.scale == u.scale and float(np.float32(t.scale)) == t.scale
    assert ck.types() == dict(Counter(expected["types"].values()))
    assert ck.types()["TL2"] == LAYERS * len(LINEARS)
    assert sum(name.endswith("_scale") for name in ck.tensor_types) == LAYERS * len(LINEARS)


def test_tl2_gives_the_tokens_and_logits_of_i2s(tmp_path: Path, tl2_config: Path) -> None:
    """The same model as TL2 and as I2_S: identical tokens and logits through the forward pass."""
    path, i2s_path = tmp_path / "tl2.gguf", tmp_path / "i2s.gguf"
    write_bitnet(path, ternary_type="TL2", seed=3)
    write_bitnet(i2s_path, ternary_type="I2_S", seed=3)
    kernels = [REFERENCE, "tl2"]
    got = compare_kernels(load(path, tl2_config=tl2_config), [5, 17, 42, 99, 3], 3, kernels)
    want = compare_kernels(load(i2s_path), [5, 17, 42, 99, 3], 3, kernels)
    assert got.same_tokens and want.same_tokens
    for k in kernels:
        assert got.generations[k].tokens == want.generations[k].tokens
        np.testing.assert_array_equal(got.generations[k].last_logits, want.generations[k].last_logits)


def test_tl2_wrong_blocks_give_other_weights(tmp_path: Path) -> None:
    """A config with other valid bm decodes to other weights, so the tests above can fail."""
    path = tmp_path / "m.gguf"
    expected = write_bitnet(path, ternary_type="TL2")
    wrong = {(m, k): (2 * bm, bk) for (m, k), (bm, bk) in TL2_BLOCKS.items()}
    assert all(m % bm == 0 for (m, _), (bm, _) in wrong.items())
    ck = load(path, tl2_config=write_kernel_config(tmp_path / "wrong.ini", wrong))
    for t in ck.ternaries():
        assert not np.array_equal(t.w_t, expected["ternary"][t.name][0]), t.name


def test_tl2_published_presets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without a config, the shapes of bitnet.cpp's published presets decode."""
    assert tl2.PRESETS[14336, 4096] == (256, 96) and tl2.PRESETS[4096, 14336] == (128, 96)
    assert tl2.PRESETS[3200, 3200] == (320, 96) and tl2.PRESETS[1536, 1536] == (128, 192)
    path = tmp_path / "m.gguf"
    expected = write_bitnet(path, ternary_type="TL2")
    monkeypatch.setattr(tl2, "PRESETS", dict(TL2_BLOCKS))
    check_ternaries(load(path), expected, "TL2")


def test_tl2_shape_without_config_or_preset(tmp_path: Path, tl2_config: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, ternary_type="TL2")
    m, k = LINEARS["attn_q"]
    message = one_line_error(path, "is not in bitnet.cpp's published TL2 kernel presets",
                             "'blk.0.attn_q.weight'", f"M {m} x K {k}", "--tl2-config", "kernel_config.ini")
    assert f"[{k}, {m}]" in message
    m, k = LINEARS["ffn_down"]
    partial = write_kernel_config(tmp_path / "partial.ini",
                                  {s: b for s, b in TL2_BLOCKS.items() if s != (m, k)})
    one_line_error(path, "is in neither", "'blk.0.ffn_down.weight'", str(partial), "--tl2-config",
                   tl2_config=partial)


def test_tl2_scale_missing_or_not_one_f32(tmp_path: Path, tl2_config: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, ternary_type="TL2", drop=["blk.1.ffn_up.weight_scale"])
    one_line_error(path, "missing its scale tensor 'blk.1.ffn_up.weight_scale'", "'blk.1.ffn_up.weight'",
                   tl2_config=tl2_config)
    write_bitnet(path, ternary_type="TL2", extra={"blk.1.ffn_up.weight_scale": np.array([0.5, 0.5])})
    one_line_error(path, re.escape("'blk.1.ffn_up.weight_scale' (F32 [2]) is not one F32 value"),
                   tl2_config=tl2_config)


@pytest.mark.parametrize("delta,what", [(-64, "truncated"), (64, "oversized")])
def test_tl2_wrong_size(tmp_path: Path, tl2_config: Path, delta: int, what: str) -> None:
    path = tmp_path / "m.gguf"
    m, k = LINEARS["attn_v"]
    w_t = np.random.default_rng(4).integers(-1, 2, (m, k)).astype(np.int8)
    data = tl2.pack(w_t, *TL2_BLOCKS[m, k]).data
    size = tl2.stored_nbytes(m, k, TL2_BLOCKS[m, k][1])
    assert data.size == size == (k - 256) * m // 3 * 5 // 8 + 256 * m // 2 * 4 // 8
    data = data[:delta] if delta < 0 else np.concatenate([data, np.zeros(delta, np.uint8)])
    write_bitnet(path, ternary_type="TL2", raw={"blk.0.attn_v.weight": (TL2, data)})
    one_line_error(path, f"{what}: tensor 'blk.0.attn_v.weight' \\(TL2", f"{size + delta} bytes",
                   f"takes {size}", tl2_config=tl2_config)


def test_tl2_index_out_of_range(tmp_path: Path, tl2_config: Path) -> None:
    """Magnitude indices 14 and 15 decode to no ternary triple."""
    path = tmp_path / "m.gguf"
    m, k = LINEARS["attn_v"]
    data = tl2.pack(np.zeros((m, k), np.int8), *TL2_BLOCKS[m, k]).data.copy()
    data[0] = 0xF0
    write_bitnet(path, ternary_type="TL2", raw={"blk.0.attn_v.weight": (TL2, data)})
    one_line_error(path, "the index at row 0, column 0 is not a ternary value", "'blk.0.attn_v.weight'",
                   tl2_config=tl2_config)


@pytest.mark.parametrize("text,match", [
    ("[Kernels_0]\nm = 256\nk = 256\nbm = 128\nbk = 96\nbmm = 64\n", r"\[Kernels_0\]: bmm = 64"),
    ("[Kernels_0]\nm = 256\nk = 256\nbm = 128\nbmm = 32\n", r"\[Kernels_0\]: missing key 'bk'"),
    ("[Kernels_0]\nm = 256\nk = 256\nbm = 12x\nbk = 96\nbmm = 32\n", "bm = '12x' is not an integer"),
    ("[Kernels_0]\nm = 256\nk = 256\nbm = 48\nbk = 96\nbmm = 32\n", "bm must be a multiple of 32"),
])
def test_tl2_bad_kernel_config(tmp_path: Path, text: str, match: str) -> None:
    path, config = tmp_path / "m.gguf", tmp_path / "kernel_config.ini"
    write_bitnet(path, ternary_type="TL2")
    config.write_text(text)
    with pytest.raises(UserError, match=match) as info:
        load(path, tl2_config=config)
    assert "\n" not in str(info.value) and str(config) in str(info.value)


def test_tl2_not_for_embeddings(tmp_path: Path) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, raw={"token_embd.weight": (TL2, np.zeros(VOCAB * HIDDEN // 4, np.uint8))})
    one_line_error(path, "type TL2 is not supported for an embedding, LM head or norm", "'token_embd.weight'")


def test_cli_tl2_config(tmp_path: Path, tl2_config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, ternary_type="TL2", seed=5)
    rc = main(["run", "model", "--gguf", str(path), "--tl2-config", str(tl2_config), "--prompt-ids", "7,8,9",
               "--new-tokens", "2", "--kernel", "reference"])
    assert rc == 0, capsys.readouterr()
    assert "generated ids (reference)" in capsys.readouterr().out
    assert main(["run", "model", "--gguf", str(path), "--prompt-ids", "7", "--kernel", "reference"]) != 0
    assert "--tl2-config" in capsys.readouterr().err
    assert main(["run", "model", "bitnet-b1.58-2b-4t", "--tl2-config", str(tl2_config)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "--tl2-config applies to 'tsar run model --gguf FILE' only" in err[-1]


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
