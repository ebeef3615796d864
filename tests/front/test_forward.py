"""A checkpoint's forward pass: every kernel gives the same tokens and logits bit for bit, the KV
cache gives what a whole prefill gives, the operators equal independent formulations, the tokenizer
round-trips, and ``tsar run model --gguf`` prints the tokens and the check."""

import math

import numpy as np
import pytest
from gguf_files import HEAD_DIM, HEADS, KV_HEADS, VOCAB, write_bitnet

from tsar.checkpoints import load
from tsar.cli.main import main
from tsar.errors import UserError
from tsar.forward import REFERENCE, Model, attention, compare_kernels, rms_norm, rope
from tsar.kernels.baselines import kernel_isa
from tsar.tokenizer import Tokenizer, byte_chars

PROMPT = [5, 17, 42, 99, 3]


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = tmp_path_factory.mktemp("gguf") / "tiny.gguf"
    write_bitnet(path, ternary_type="I2_S", seed=3)
    return load(path)


def test_every_kernel_gives_the_same_tokens_and_logits(checkpoint) -> None:
    """The same integer products and dequantization in every backend: identical tokens and logits
    through the reference, native baselines of several formats and T-SAR kernels of both widths."""
    kernels = [REFERENCE, "tl2", "i2s", "tq1_0", "int2", "tsar-c2s4-op", "tsar-c4s4-ap-tokens",
               "tsar-c2s4-512-op"]
    if kernel_isa("int2", "avx512") == "avx512":
        kernels.append("int2-avx512")
    got = compare_kernels(checkpoint, PROMPT, 4, kernels)
    assert got.same_tokens
    assert all(got.logit_difference(k) == 0 for k in kernels)
    first = got.generations[REFERENCE]
    assert len(first.tokens) == 4 and np.isfinite(first.last_logits).all()
    assert set(first.operators) >= {"embedding", "rmsnorm", "bitlinear", "rope", "attention", "ffn_act",
                                    "lm_head", "sampling"}


def test_a_wrong_kernel_is_caught(checkpoint, monkeypatch) -> None:
    """A BitLinear off by one weight's product changes the logits the comparison checks."""
    import tsar.forward as forward

    exact = forward.backend(REFERENCE)

    def off(kernel, threads=1):
        if kernel == REFERENCE:
            return exact
        return lambda t: (lambda x: exact(t)(x) + np.float32(1e-3))
    monkeypatch.setattr(forward, "backend", off)
    got = compare_kernels(checkpoint, PROMPT, 2, [REFERENCE, "broken"])
    assert got.logit_difference("broken") > 0


def test_decoding_with_the_cache_equals_a_whole_prefill(checkpoint) -> None:
    """Token by token through the KV cache, the last logits equal those of one prefill of the whole
    sequence (the same operations; float32 sums may round differently in the attention)."""
    model = Model(checkpoint)
    run = model.generate(PROMPT, 4)
    whole = model.generate([*PROMPT, *run.tokens[:-1]], 1)
    assert whole.tokens[0] == run.tokens[-1]
    np.testing.assert_allclose(whole.last_logits, run.last_logits, rtol=1e-4, atol=1e-5)


def test_rope_rotates_pairs_as_complex_numbers() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 2, 8)).astype(np.float32)
    pos = np.array([0, 5, 11])
    freqs = 10000.0 ** (-np.arange(0, 8, 2) / 8)
    turn = np.exp(1j * pos[:, None, None] * freqs)
    neox = (x[..., :4] + 1j * x[..., 4:]) * turn
    want = np.concatenate([neox.real, neox.imag], -1)
    np.testing.assert_allclose(rope(x, pos, 10000.0, True), want, atol=1e-5)
    pairs = (x[..., 0::2] + 1j * x[..., 1::2]) * turn
    want = np.stack([pairs.real, pairs.imag], -1).reshape(x.shape)
    np.testing.assert_allclose(rope(x, pos, 10000.0, False), want, atol=1e-5)


def test_attention_equals_a_loop_over_heads_and_positions() -> None:
    rng = np.random.default_rng(1)
    n, start = 3, 2
    q = rng.standard_normal((n, HEADS, HEAD_DIM)).astype(np.float32)
    keys = rng.standard_normal((start + n, KV_HEADS, HEAD_DIM)).astype(np.float16)
    values = rng.standard_normal((start + n, KV_HEADS, HEAD_DIM)).astype(np.float16)
    got = attention(q, keys, values, start)
    for i in range(n):
        for h in range(HEADS):
            kv = h // (HEADS // KV_HEADS)
            seen = start + i + 1
            s = keys[:seen, kv].astype(np.float64) @ q[i, h] / math.sqrt(HEAD_DIM)
            p = np.exp(s - s.max())
            want = (p / p.sum()) @ values[:seen, kv].astype(np.float64)
            np.testing.assert_allclose(got[i, h * HEAD_DIM:(h + 1) * HEAD_DIM], want, rtol=1e-4, atol=1e-5)


def test_rms_norm() -> None:
    x = np.array([[3.0, 4.0]], np.float32)
    np.testing.assert_allclose(rms_norm(x, np.array([1.0, 2.0], np.float32), 0.0),
                               [[3 / math.sqrt(12.5), 8 / math.sqrt(12.5)]], rtol=1e-6)


def test_byte_level_tokenizer_round_trips_and_merges() -> None:
    chars = byte_chars()
    assert len(set(chars)) == 256 and chars[ord("a")] == "a" and chars[ord(" ")] == "\u0120"
    merges = ("\u0120 c", "\u0120c a", "a t", "\u0120ca t")
    tokens = (*chars, "\u0120c", "\u0120ca", "at", "\u0120cat")
    tok = Tokenizer("gpt2", tokens, merges)
    ids = tok.encode("a cat, 12 cats!")
    assert tokens.index("\u0120cat") in ids
    assert tok.decode(ids) == "a cat, 12 cats!"
    assert tok.decode(tok.encode("héllo wörld")) == "héllo wörld"


def test_sentencepiece_tokenizer_round_trips() -> None:
    tokens = ("<unk>", "\u2581the", "\u2581", "t", "h", "e", "<0xC3>", "<0xA9>", "\u2581cat")
    tok = Tokenizer("llama", tokens)
    ids = tok.encode("the cat é")
    assert ids[:2] == [1, 8] and tok.decode(ids) == " the cat é"


def test_cli_runs_a_gguf_and_checks_the_kernels(tmp_path, capsys) -> None:
    path = tmp_path / "m.gguf"
    write_bitnet(path, ternary_type="TQ2_0", seed=4)
    rc = main(["run", "model", "--gguf", str(path), "--prompt-ids", "7,8,9", "--new-tokens", "3",
               "--kernel", "tsar-c2s4-op", "--check", "reference,tq2_0"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "identical tokens and logits through tsar-c2s4-op, reference, tq2_0" in out
    assert "lm_head" in out and "attention" in out


def test_cli_refuses_a_bad_checkpoint_in_one_line(tmp_path, capsys) -> None:
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"not a gguf file at all")
    assert main(["run", "model", "--gguf", str(bad)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "bad.gguf" in err[-1] and "Traceback" not in "\n".join(err)


def test_prompt_ids_outside_the_vocabulary_are_refused(checkpoint) -> None:
    with pytest.raises(UserError, match="outside the vocabulary"):
        Model(checkpoint).generate([VOCAB], 1)
