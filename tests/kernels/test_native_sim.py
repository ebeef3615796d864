import ctypes
import shutil

import numpy as np
import pytest

from tsar.kernels import reference as R
from tsar.kernels import simbuild
from tsar.kernels.baselines import aligned_empty
from tsar.kernels.formats import i2s, int2_vnni, tl1, tl2

pytestmark = [pytest.mark.native,
              pytest.mark.skipif(shutil.which("gcc") is None or shutil.which("nm") is None,
                                 reason="needs gcc and nm")]


@pytest.fixture(scope="module")
def sim_lib(tmp_path_factory):
    path = simbuild.build_sim_library(out_dir=tmp_path_factory.mktemp("sim"))
    assert simbuild.undefined_symbols(path) == []
    assert simbuild.build_sim_library(out_dir=path.parent) == path      # cached
    return ctypes.CDLL(str(path))


def _ptr(a):
    return ctypes.c_void_p(a.ctypes.data)


def test_entry_points_and_avx512_only_in_its_entries(sim_lib):
    """EVEX code (zmm, opmasks) lies only in the functions of the AVX-512 entries (named with the
    ISA, or their rows/block helpers); the AVX2 entries are AVX2 only."""
    import re
    import subprocess
    for name in simbuild.ENTRY_POINTS:
        assert hasattr(sim_lib, name)
    assert "tsar_sim_int2_avx512_gemv" in simbuild.ENTRY_POINTS
    dis = subprocess.run(["objdump", "-d", sim_lib._name], capture_output=True, text=True).stdout
    functions = re.split(r"\n(?=[0-9a-f]+ <)", dis)
    evex = {re.match(r"[0-9a-f]+ <([^>]+)>", f).group(1) for f in functions[1:]
            if "zmm" in f or "%k" in f.replace("%rdx", "")}
    assert evex and all("avx512" in name for name in evex), evex


def test_vnni_entries_exact_natively_and_simulated(sim_lib):
    from tsar.kernels.registry import SIM_ISAS
    from tsar.sim.platforms.detect import cpu_flags
    from tsar.simulate.native_kernel import simulate_native

    rng = np.random.default_rng(9)
    m, k = 64, 2560
    w = rng.integers(-1, 2, (m, k), dtype=np.int8)
    a = rng.integers(-127, 128, (3, k), dtype=np.int8)
    for isa in ("avx512", "avxvnni"):
        for n in (1, 3):
            assert simulate_native("int2", m, k, n=n, isa=isa, weights=w, acts=a[:n]).exact, (isa, n)
    packed = int2_vnni.pack(w)
    ran = []
    for isa in ("avx512", "avxvnni"):
        if not set(SIM_ISAS[isa]) <= cpu_flags():
            continue
        out = np.zeros(m, np.int32)
        entry = getattr(sim_lib, f"tsar_sim_int2_{isa}_gemv")
        assert entry(_ptr(packed.data), m, k, _ptr(a[0]), _ptr(out)) == 0
        assert (out == R.ternary_gemv(w, a[0])).all(), isa
        ran.append(isa)
    if not ran:
        pytest.skip("the host CPU has neither AVX-512 VNNI nor AVX-VNNI: the native half is skipped")


@pytest.mark.parametrize("fmt", ["tl2", "tl1", "i2s", "int2"])
def test_sim_gemv_exact(sim_lib, fmt):
    rng = np.random.default_rng(5)
    m, k = (64, 2560) if fmt != "i2s" else (8, 2560)
    w = rng.integers(-1, 2, (m, k), dtype=np.int8)
    a = rng.integers(-127, 128, k, dtype=np.int8)
    out = np.zeros(m, np.int32)
    if fmt in ("tl2", "tl1"):
        packed = (tl2 if fmt == "tl2" else tl1).pack(w, bm=64)
        size_fn = getattr(sim_lib, f"tsar_sim_{fmt}_work_size")
        size_fn.restype = ctypes.c_ulong
        work = aligned_empty(size_fn(m, k, packed.bm, packed.bk) + 64)
        rc = getattr(sim_lib, f"tsar_sim_{fmt}_gemv")(_ptr(packed.data), m, k, packed.bm, packed.bk,
                                                      _ptr(a), _ptr(work), _ptr(out))
    else:
        packed = (i2s if fmt == "i2s" else int2_vnni).pack(w)
        rc = getattr(sim_lib, f"tsar_sim_{fmt}_gemv")(_ptr(packed.data), m, k, _ptr(a), _ptr(out))
    assert rc == 0
    assert (out == R.ternary_gemv(w, a)).all()


@pytest.mark.parametrize("fmt", ["tl2", "tl1", "i2s", "int2"])
def test_sim_gemm_entry_exact(fmt):
    """The GEMM entries run the token-blocked rows loops (int2: the decoded-block micro-kernel for
    n >= 4, with its tails) and agree with the reference, adversarial extremes included."""
    from tsar.simulate.native_kernel import simulate_native

    for n in (2, 5):
        assert simulate_native(fmt, 64, 384, n=n).exact, n


# ---- public ternary formats (TQ1_0, TQ2_0, IQ1_BN, IQ2_BN): prepared activations and sums ----

PUBLIC = ("tq1_0", "tq2_0", "iq1_bn", "iq2_bn")
EXTREMES = [(127, 1), (-127, 1), (127, -1), (-127, -1)]
"""(activation, weight) filled everywhere: the largest int16 partial sums the kernels build."""


def test_public_formats_are_simulated_not_compared():
    from tsar.kernels.registry import NATIVE_KERNELS, SIMULATED_PUBLIC_VARIANTS
    from tsar.simulate.native_kernel import (
        NATIVE_SIM_KERNELS,
        NATIVE_SIM_VARIANTS,
        PUBLIC_FORMAT_SIM_KERNELS,
        SIM_KERNELS,
    )

    assert NATIVE_SIM_KERNELS == ("tl2", "tl1", "i2s", "int2")
    assert NATIVE_SIM_VARIANTS == ("i2s-avxvnni", "int2-avxvnni", "int2-avx512")
    assert sorted(PUBLIC_FORMAT_SIM_KERNELS) == sorted(PUBLIC)
    assert tuple(f"{k}-avxvnni" for k in PUBLIC_FORMAT_SIM_KERNELS) == SIMULATED_PUBLIC_VARIANTS
    assert set(SIM_KERNELS) == (set(NATIVE_SIM_KERNELS) | set(NATIVE_SIM_VARIANTS) | set(PUBLIC)
                                | set(SIMULATED_PUBLIC_VARIANTS))
    assert {NATIVE_KERNELS[k].c_source for k in PUBLIC} == {"tq.c", "iqbn.c"}
    assert simbuild.SOURCES.count("tq.c") == simbuild.SOURCES.count("iqbn.c") == 1


def _padded(kernel, w):
    """``w`` packed for ``kernel`` in a 64-byte aligned buffer with the zero padding its loads need."""
    from tsar.kernels.registry import NATIVE_KERNELS
    from tsar.simulate.native_kernel import pack_native

    data = pack_native(kernel, w).data.view(np.uint8)
    buf = aligned_empty(data.size + NATIVE_KERNELS[kernel].overread)
    buf[:] = 0
    buf[:data.size] = data
    return buf


def _sim_call(sim_lib, kernel, w, a):
    """Run the simulator library's own machine code natively (GEMV for one token, else GEMM)."""
    (m, k), n = w.shape, a.shape[0]
    buf, a = _padded(kernel, w), np.ascontiguousarray(a)
    out = np.zeros((n, m), np.int32)
    if n == 1:
        size_fn, args = getattr(sim_lib, f"tsar_sim_{kernel}_work_size"), (m, k, 0, 0)
    else:
        size_fn, args = getattr(sim_lib, f"tsar_sim_{kernel}_gemm_work_size"), (m, k, 0, 0, n)
    size_fn.restype = ctypes.c_ulong
    work = aligned_empty(size_fn(*args) + 64)
    if n == 1:
        rc = getattr(sim_lib, f"tsar_sim_{kernel}_gemv")(_ptr(buf), m, k, _ptr(a), _ptr(work), _ptr(out))
    else:
        rc = getattr(sim_lib, f"tsar_sim_{kernel}_gemm")(_ptr(buf), m, k, _ptr(a), n, _ptr(work), _ptr(out))
    return rc, out


@pytest.mark.parametrize("kernel", PUBLIC)
def test_public_sim_library_exact_natively(sim_lib, kernel):
    """The simulator build, run natively: exact at BitNet widths past every int16 flush length
    (K = 2560, 6912), odd block counts (IQ*_BN at K = 192), token groups 1..4 and 5, 16, and the
    adversarial extremes (all +-127 against all +-1) at K = 6912, where a wrap would show."""
    rng = np.random.default_rng(11)
    k_odd = 192 if kernel.startswith("iq") else 768
    for m, k, n in ((48, 2560, 1), (33, 6912, 1), (17, k_odd, 1), (16, 2560, 2), (16, 2560, 3),
                    (16, 2560, 5), (20, k_odd, 16)):
        w = rng.integers(-1, 2, (m, k), dtype=np.int8)
        a = rng.integers(-127, 128, (n, k), dtype=np.int8)
        rc, out = _sim_call(sim_lib, kernel, w, a)
        assert rc == 0
        assert (out == R.ternary_matmul(w, a)).all(), (m, k, n)
    for act, wt in EXTREMES:
        for n in (1, 2, 3, 4):
            w = np.full((16, 6912), wt, np.int8)
            a = np.full((n, 6912), act, np.int8)
            rc, out = _sim_call(sim_lib, kernel, w, a)
            assert rc == 0
            assert (out == act * wt * 6912).all(), (act, wt, n)


@pytest.mark.parametrize("kernel", PUBLIC)
def test_public_sim_library_rejects_shapes(sim_lib, kernel):
    unit = 256 if kernel.startswith("tq") else 64
    a = np.zeros((2, 4 * unit + unit // 2), np.int8)
    out = np.zeros((2, 16), np.int32)
    work, w, k = aligned_empty(1 << 16), aligned_empty(1 << 16), a.shape[1]
    gemv, gemm = (getattr(sim_lib, f"tsar_sim_{kernel}_{entry}") for entry in ("gemv", "gemm"))
    assert gemv(_ptr(w), 16, k, _ptr(a), _ptr(work), _ptr(out)) == -1
    assert gemm(_ptr(w), 16, k, _ptr(a), 2, _ptr(work), _ptr(out)) == -1


@pytest.mark.parametrize("kernel", [*PUBLIC, *(f"{k}-avxvnni" for k in PUBLIC)])
def test_public_formats_exact_in_the_python_engine(kernel):
    """Instruction by instruction in the Python engine: GEMV, GEMM with token-group remainders
    (3: one group of 3; 6: 4 + 2, the 2-bit formats' two-sum path; 16 in test_public_format_counts),
    odd IQ*_BN block counts, and the adversarial extremes over K = 2048, past every int16 flush
    length (rows of all +1 and all -1 against tokens of all +127 and all -127)."""
    from tsar.simulate.native_kernel import simulate_native

    runs = [(32, 256, 1), (16, 512, 3), (16, 256, 6)] + ([(16, 192, 1)] if kernel.startswith("iq") else [])
    for m, k, n in runs:
        run = simulate_native(kernel, m, k, n=n)
        assert run.exact, (m, k, n)
        assert run.weight_bytes == m * _row_bytes(kernel.removesuffix("-avxvnni"), k)
    w = np.repeat(np.array([[1], [-1]], np.int8), 2048, axis=1)
    for acts in ([127], [127, -127, -127]):
        a = np.repeat(np.array(acts, np.int8)[:, None], 2048, axis=1)
        run = simulate_native(kernel, 2, 2048, n=len(acts), weights=w, acts=a)
        assert run.exact, acts


def _row_bytes(kernel, k):
    """Bytes of one packed row, from the formats' published block sizes."""
    return {"tq1_0": 54 * (k // 256), "tq2_0": 66 * (k // 256),
            "iq1_bn": 2 + 13 * (k // 64), "iq2_bn": 4 + 16 * (k // 64)}[kernel]


@pytest.mark.parametrize("kernel,k", [("tq1_0", 320), ("tq2_0", 128), ("iq1_bn", 96), ("iq2_bn", 100)])
def test_public_format_shape_errors_are_user_errors(kernel, k):
    from tsar.errors import UserError
    from tsar.simulate.native_kernel import simulate_native

    with pytest.raises(UserError) as err:
        simulate_native(kernel, 16, k)
    msg = str(err.value)
    assert "\n" not in msg and kernel in msg and str(k) in msg


@pytest.fixture(scope="module")
def counts_cache(tmp_path_factory):
    """One private cache for the counts tests (the simulator library is built into it once)."""
    return tmp_path_factory.mktemp("cache")


@pytest.mark.parametrize("kernel", PUBLIC)
def test_public_format_counts(kernel, counts_cache, monkeypatch):
    """simulated_counts drives the GEMM entry for a block of 16 tokens (cached on disk)."""
    from tsar.simulate.counts import simulated_counts

    monkeypatch.setenv("TSAR_CACHE_DIR", str(counts_cache))
    block = simulated_counts(kernel, 8, 256, tokens=16)   # exact, or simulated_counts raises
    one = simulated_counts(kernel, 8, 256)
    assert block.tokens == 16 and one.tokens == 1
    assert block.weight_bytes == one.weight_bytes == 8 * _row_bytes(kernel, 256)
    assert one.bytes_moved >= one.weight_bytes            # every weight byte is loaded for a token
    # each decoded weight vector serves a group of up to four tokens: fewer instructions a token
    assert one.stats.instructions < block.stats.instructions < 16 * one.stats.instructions
    cached = {path.name.rsplit("-", 1)[0] for path in (counts_cache / "counts").glob(f"{kernel}-*.pkl")}
    assert {f"{kernel}-16x8x256", f"{kernel}-8x256"} <= cached  # both kept (with the runs they came from)


@pytest.mark.slow
@pytest.mark.parametrize("kernel", PUBLIC)
def test_public_format_extrapolated_counts_equal_direct(kernel, counts_cache, monkeypatch):
    """Counts extrapolated from 256 and 512 rows equal a direct simulation of 1024 rows."""
    from tsar.simulate.counts import ROW_UNIT, simulated_counts
    from tsar.simulate.native_kernel import simulate_native

    monkeypatch.setenv("TSAR_CACHE_DIR", str(counts_cache))
    m, k = 4 * ROW_UNIT, 256
    extrapolated = simulated_counts(kernel, m, k)
    direct = simulate_native(kernel, m, k)
    assert direct.exact
    assert extrapolated.stats.per_address == direct.stats.per_address
    for field in ("instructions", "vector_bytes_read", "vector_bytes_written", "scalar_bytes_read",
                  "scalar_bytes_written"):
        assert getattr(extrapolated.stats, field) == getattr(direct.stats, field)
