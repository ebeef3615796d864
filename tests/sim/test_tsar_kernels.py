"""T-SAR kernels in the simulator: the assembly GEMV strip, the C header, the C GEMV."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as hs

from tsar.isa import C2S4, codec, encode, make, pack_tile
from tsar.isa.operands import Memory, Register
from tsar.kernels import kernel_c_dir
from tsar.paths import kernel_source
from tsar.sim import Machine, SimulationError, compile_c, create_machine
from tsar.sim.elf import load_elf_image


def _weights_strips(tile: np.ndarray) -> np.ndarray:
    """(m, k) ternary -> strip-major, K-ordered TGEMV operands."""
    m, k = tile.shape
    blocks = tile.reshape(m // 16, 16, k // 8, 8).transpose(0, 2, 1, 3)
    return pack_tile(C2S4, blocks).reshape(-1)


@pytest.fixture(scope="module")
def asm_machine() -> Machine:
    m = create_machine(data_size=8 << 20)
    m.load_asm(kernel_source("gemv16_c2s4.s").read_text())
    return m


@settings(max_examples=12, deadline=None)
@given(tiles=hs.integers(1, 80), seed=hs.integers(0, 2**32 - 1), extreme=hs.booleans())
def test_gemv16_asm_is_bit_exact(asm_machine: Machine, tiles: int, seed: int, extreme: bool):
    rng = np.random.default_rng(seed)
    k = 8 * tiles
    act = np.full(k, 127, np.int8) if extreme else rng.integers(-127, 128, k).astype(np.int8)
    tile = np.ones((16, k), int) if extreme else rng.integers(-1, 2, (16, k))
    out = np.zeros(16, np.int32)
    asm_machine.call("gemv16_c2s4", act, _weights_strips(tile), out, k)
    np.testing.assert_array_equal(out, tile @ act.astype(np.int64))
    s = asm_machine.stats
    assert s.by_mnemonic["tlut2x4"] == s.by_mnemonic["tgemv8x16"] == tiles
    assert s.tsar_uops == tiles * (C2S4.tlut_uops + C2S4.tgemv_uops)
    assert s.vector_bytes_read == tiles * (C2S4.k + C2S4.weight_bytes)


def test_gemv16_asm_trace_addresses(asm_machine: Machine):
    k = 64
    act = np.ones(k, np.int8)
    out = np.zeros(16, np.int32)
    asm_machine.call("gemv16_c2s4", act, _weights_strips(np.ones((16, k), int)), out, k, trace=True)
    t = asm_machine.trace
    reads = t.address[(t.size == 32) & ~t.write]
    assert np.all(np.diff(reads.astype(np.int64)) == 32)  # weights streamed in order


_HEADER_TEST = r"""
#include "tsar.h"
void regs(const int8_t *a, const uint8_t *w, __m256i *out)
{
    register const int8_t *pa __asm__("%(pa)s") = a;
    register const uint8_t *pw __asm__("%(pw)s") = w;
    register __m256i l0 __asm__("ymm%(lo)d");
    register __m256i l1 __asm__("ymm%(hi)d");
    register __m256i acc __asm__("ymm%(acc)d") = *out;
    __asm__ volatile("" : "+r"(pa), "+r"(pw));
    TSAR_TLUT2X4(l0, l1, pa);
    TSAR_TGEMV8X16(acc, l0, l1, pw);
    *out = acc;
}
"""


@pytest.mark.parametrize("pa,pw,lo,acc", [("rdi", "rsi", 8, 0), ("r12", "r13", 0, 15), ("rbx", "r14", 14, 3),
                                         ("r9", "r15", 6, 11)])
def test_header_encodings_match_the_isa(tmp_path, pa: str, pw: str, lo: int, acc: int):
    src = tmp_path / f"hdr_{pa}_{pw}_{lo}_{acc}.c"
    src.write_text(_HEADER_TEST % {"pa": pa, "pw": pw, "lo": lo, "hi": lo + 1, "acc": acc})
    so = compile_c(src)
    code = bytes(load_elf_image(so.read_bytes()).image)
    found = [codec.decode(code, i) for i in range(len(code) - 1) if codec.is_tsar(code, i)]
    assert [str(x) for x in found] == [
        str(make("tlut2x4", Register("ymm", lo), Memory(base=pa, size=8))),
        str(make("tgemv8x16", Register("ymm", acc), Register("ymm", lo), Memory(base=pw, size=32))),
    ]
    for inst in found:
        assert encode(inst) in code


def test_header_rejects_misaligned_groups(tmp_path):
    src = tmp_path / "bad_group.c"
    src.write_text(_HEADER_TEST % {"pa": "rdi", "pw": "rsi", "lo": 3, "hi": 4, "acc": 0})
    with pytest.raises(Exception, match="LUT group"):
        compile_c(src)


@pytest.fixture(scope="module")
def c_machine() -> Machine:
    m = create_machine(data_size=16 << 20)
    m.load_elf(compile_c(kernel_c_dir() / "tsar_gemv_c2s4.c"))
    return m


@pytest.mark.parametrize("m_rows,k", [(16, 8), (32, 520), (48, 256), (16, 2560)])
def test_c_gemv_is_bit_exact(c_machine: Machine, m_rows: int, k: int):
    rng = np.random.default_rng(m_rows * k)
    act = rng.integers(-127, 128, k).astype(np.int8)
    tile = rng.integers(-1, 2, (m_rows, k))
    out = np.zeros(m_rows, np.int32)
    c_machine.call("tsar_gemv_c2s4", act, _weights_strips(tile), out, m_rows, k)
    np.testing.assert_array_equal(out, tile @ act.astype(np.int64))
    assert c_machine.stats.by_mnemonic["tgemv8x16"] == m_rows * k // 128


def test_c_gemv_contains_tsar_instructions():
    code = bytes(load_elf_image(compile_c(kernel_c_dir() / "tsar_gemv_c2s4.c").read_bytes()).image)
    found = [codec.decode(code, i).mnemonic for i in range(len(code) - 1) if codec.is_tsar(code, i)]
    assert found == ["tlut2x4", "tgemv8x16"]


def test_elf_with_libc_call_is_rejected(tmp_path):
    src = tmp_path / "libc.c"
    src.write_text("#include <stddef.h>\nvoid *memcpy(void *, const void *, size_t);\n"
                   "void f(char *a, const char *b, size_t n) { memcpy(a, b, n); }\n")
    with pytest.raises(SimulationError, match="memcpy"):
        create_machine(data_size=1 << 20).load_elf(compile_c(src))


def test_avx2_c_kernel(tmp_path):
    m = create_machine(data_size=1 << 20)
    m.load_elf(compile_c(kernel_c_dir() / "dot_i8_avx2.c", opt="-O3"))
    rng = np.random.default_rng(3)
    for n in (0, 1, 31, 32, 33, 1000):
        a, b = (rng.integers(-128, 128, n).astype(np.int8) for _ in range(2))
        assert m.call("dot_i8", a, b, n, returns="i32") == int(a.astype(np.int64) @ b)
    assert m.stats.by_class["vector"] > 0
