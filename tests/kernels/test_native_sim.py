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
CHECKED = ("dense", "trit5")
"""Checked here at every level, at the end: dense (row sums; simulated, not modelled) and trit5 (5
trits per byte; a modelled baseline)."""
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

    assert NATIVE_SIM_KERNELS == ("tl2", "tl1", "i2s", "int2", "trit5")
    assert NATIVE_SIM_VARIANTS == ("i2s-avxvnni", "i2s-avx512", "int2-avxvnni", "int2-avx512",
                                   "trit5-avxvnni", "trit5-avx512")
    assert ("dense", *PUBLIC) == PUBLIC_FORMAT_SIM_KERNELS    # simulated and checked, not modelled
    assert ("dense-avxvnni", "dense-avx512",
            *(f"{k}-avxvnni" for k in PUBLIC)) == SIMULATED_PUBLIC_VARIANTS
    assert set(SIM_KERNELS) == (set(NATIVE_SIM_KERNELS) | set(NATIVE_SIM_VARIANTS) | {"dense"}
                                | set(PUBLIC) | set(SIMULATED_PUBLIC_VARIANTS))
    assert {NATIVE_KERNELS[k].c_source for k in PUBLIC} == {"tq.c", "iqbn.c"}
    assert simbuild.SOURCES.count("tq.c") == simbuild.SOURCES.count("iqbn.c") == 1


def _padded(kernel, w):
    """``w`` packed for ``kernel`` (the format object) and its bytes in a 64-byte aligned buffer
    with the zero padding its loads need."""
    from tsar.kernels.registry import NATIVE_KERNELS
    from tsar.simulate.native_kernel import pack_native

    packed = pack_native(kernel, w)
    data = packed.data.view(np.uint8)
    buf = aligned_empty(data.size + NATIVE_KERNELS[kernel].overread)
    buf[:] = 0
    buf[:data.size] = data
    return packed, buf


def _sim_call(sim_lib, kernel, w, a, isa="avx2"):
    """Run the simulator library's own machine code natively (GEMV for one token, else GEMM) at
    ``isa``; dense's entries take the whole weight descriptor (row sums, flush step)."""
    from tsar.kernels.registry import NATIVE_KERNELS, sim_entry

    (m, k), n = w.shape, a.shape[0]
    (packed, buf), stem = _padded(kernel, w), sim_entry(kernel, isa)
    a = _aligned(a)
    out = np.zeros((n, m), np.int32)
    fields = (m, k, 0, packed.bk) if NATIVE_KERNELS[kernel].aux else (m, k, 0, 0)
    weights = (_ptr(buf), _ptr(packed.aux), *fields) if NATIVE_KERNELS[kernel].aux else (_ptr(buf), m, k)
    if n == 1:
        size_fn, args = getattr(sim_lib, f"tsar_sim_{stem}_work_size"), fields
    else:
        size_fn, args = getattr(sim_lib, f"tsar_sim_{stem}_gemm_work_size"), (*fields, n)
    size_fn.restype = ctypes.c_ulong
    work = aligned_empty(size_fn(*args) + 64)
    if n == 1:
        rc = getattr(sim_lib, f"tsar_sim_{stem}_gemv")(*weights, _ptr(a), _ptr(work), _ptr(out))
    else:
        rc = getattr(sim_lib, f"tsar_sim_{stem}_gemm")(*weights, _ptr(a), n, _ptr(work), _ptr(out))
    return rc, out


def _aligned(a):
    """A 64-byte aligned copy of int8 ``a`` (dense's prep loads the activations aligned)."""
    buf = aligned_empty(a.nbytes).view(np.int8).reshape(a.shape)
    buf[...] = a
    return buf


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


# ---- dense (int8 weights, row sums) and trit5 (5 trits per byte): every ISA level ----------------

CHECKED_LEVELS = [(kernel, isa) for kernel in CHECKED for isa in ("avx2", "avxvnni", "avx512")]
CHECKED_LABELS = [kernel if isa == "avx2" else f"{kernel}-{isa}" for kernel, isa in CHECKED_LEVELS]
CHECKED_NATIVE = {
    "dense": [(13, 2560, (1,)), (96, 6912, (1,)), (13, 1024, (2, 3, 4, 5, 7, 9, 16))],
    "trit5": [(32, 2560, (1,)), (96, 6912, (1,)), (64, 1013, (2, 3, 4, 5, 7, 9, 13, 16, 25, 30))],
}
"""(M, K, token counts) run natively: GEMV at BitNet widths, GEMM through every tile and token-group
remainder (dense: 6 x 2 row-token tiles on AVX2 and AVX-VNNI, 4 x 4 on AVX-512, 13 rows leaving one;
trit5: token pairs on AVX2 and AVX-VNNI, 2- and 3-token blocks and GEMM groups of 12, 8 and 4 on
AVX-512)."""


def _host_runs(kernel, isa):
    """Whether the host executes the simulator library's ``isa`` rows of ``kernel`` (trit5's AVX-512
    rows are its VBMI ones)."""
    from tsar.kernels.registry import SIM_ISAS
    from tsar.sim.platforms.detect import cpu_flags

    vbmi = {"avx512vbmi"} if (kernel, isa) == ("trit5", "avx512") else set()
    return set(SIM_ISAS[isa]) | vbmi <= cpu_flags()


def test_dense_and_trit5_in_the_simulator_library():
    """Both simulated at every level (entry points named with the level); trit5 is a modelled
    baseline (its AVX-512 rows need VBMI), dense is checked, not modelled."""
    from tsar.kernels.registry import NATIVE_KERNELS, runs_build

    for kernel in CHECKED:
        spec = NATIVE_KERNELS[kernel]
        assert spec.simulated and spec.prepared and spec.modelled == (kernel == "trit5")
        assert spec.sim_isas == ("avx2", "avxvnni", "avx512")
        for stem in (kernel, f"{kernel}_avxvnni", f"{kernel}_avx512"):
            assert {f"tsar_sim_{stem}_{e}" for e in ("work_size", "gemv", "gemm_work_size", "gemm")} \
                <= set(simbuild.ENTRY_POINTS)
    assert NATIVE_KERNELS["dense"].aux and not NATIVE_KERNELS["trit5"].aux
    avx512 = ("avx512f", "avx512bw", "avx512vl", "avx512_vnni")
    assert runs_build("int2", "avx512", avx512) and not runs_build("trit5", "avx512", avx512)
    assert runs_build("trit5", "avx512", (*avx512, "avx512vbmi"))


@pytest.mark.parametrize(("kernel", "isa"), CHECKED_LEVELS)
def test_checked_sim_library_exact_natively(sim_lib, kernel, isa):
    """The simulator build of dense and trit5, run natively at each level the host runs: exact on
    random inputs (CHECKED_NATIVE: K = 6912 passes dense's int16 flush windows and is not a multiple
    of trit5's 20 columns, which its entries then copy into zero-padded rows; dense also with any
    int8 weights |w| <= 64) and on the adversarial extremes at K = 6912 (dense: |w| = 64, its AVX2
    rows widening every step; trit5: all +-1), against tokens of all +-127."""
    if not _host_runs(kernel, isa):
        pytest.skip(f"the host CPU does not run {kernel}'s {isa} rows")
    rng = np.random.default_rng(13)
    for m, k, tokens in CHECKED_NATIVE[kernel]:
        w = rng.integers(-1, 2, (m, k), dtype=np.int8)
        for n in tokens:
            a = rng.integers(-127, 128, (n, k), dtype=np.int8)
            rc, out = _sim_call(sim_lib, kernel, w, a, isa)
            assert rc == 0 and (out == R.ternary_matmul(w, a)).all(), (m, k, n)
    if kernel == "dense":
        w = rng.integers(-64, 65, (13, 2560), dtype=np.int8)
        for n in (1, 5):
            a = rng.integers(-127, 128, (n, 2560), dtype=np.int8)
            rc, out = _sim_call(sim_lib, kernel, w, a, isa)
            assert rc == 0 and (out == R.ternary_matmul(w, a)).all(), n
    top, m = (64, 7) if kernel == "dense" else (1, 32)
    for act, wt in EXTREMES:
        for n in (1, 2, 5):
            w = np.full((m, 6912), wt * top, np.int8)
            a = np.full((n, 6912), act, np.int8)
            rc, out = _sim_call(sim_lib, kernel, w, a, isa)
            assert rc == 0 and (out == act * wt * top * 6912).all(), (act, wt, n)


def test_checked_sim_library_rejects_shapes(sim_lib):
    """dense: K not a multiple of 64, no row sums, activations not 32-byte aligned; trit5: M not a
    multiple of 32. -1, nothing run."""
    w, work, out = aligned_empty(1 << 16), aligned_empty(1 << 16), np.zeros((2, 64), np.int32)
    a, aux = aligned_empty(1 << 12), np.zeros(64, np.int32)
    null = ctypes.c_void_p(0)
    for stem in ("dense", "dense_avxvnni", "dense_avx512"):
        gemv, gemm = (getattr(sim_lib, f"tsar_sim_{stem}_{entry}") for entry in ("gemv", "gemm"))
        assert gemv(_ptr(w), _ptr(aux), 16, 128, 0, 4, _ptr(a), _ptr(work), _ptr(out)) == 0
        assert gemv(_ptr(w), _ptr(aux), 16, 96, 0, 3, _ptr(a), _ptr(work), _ptr(out)) == -1
        assert gemv(_ptr(w), null, 16, 128, 0, 4, _ptr(a), _ptr(work), _ptr(out)) == -1
        assert gemv(_ptr(w), _ptr(aux), 16, 128, 0, 4, ctypes.c_void_p(a.ctypes.data + 8), _ptr(work),
                    _ptr(out)) == -1
        assert gemm(_ptr(w), _ptr(aux), 16, 96, 0, 3, _ptr(a), 2, _ptr(work), _ptr(out)) == -1
        assert gemm(_ptr(w), _ptr(aux), 16, 128, 0, 4, _ptr(a), 0, _ptr(work), _ptr(out)) == -1
    for stem in ("trit5", "trit5_avxvnni", "trit5_avx512"):
        gemv, gemm = (getattr(sim_lib, f"tsar_sim_{stem}_{entry}") for entry in ("gemv", "gemm"))
        assert gemv(_ptr(w), 16, 100, _ptr(a), _ptr(work), _ptr(out)) == -1
        assert gemm(_ptr(w), 48, 100, _ptr(a), 2, _ptr(work), _ptr(out)) == -1


def _checked_weight_bytes(kernel, m, k):
    """dense: one byte a weight; trit5: one a group of five, K padded to whole quads of 20."""
    return m * k if kernel == "dense" else m * (-(-k // 20) * 4)


def _mixed(m, k, n, top, seed):
    """Random weights (|w| <= top) and tokens with the extremes mixed in: rows 0 and 1 all +top and
    all -top, token 0 in thirds (random, all +127, all -127: every int16 window of dense's AVX2 rows
    in the middle third holds the largest pair sums), tokens 1 and 2 (n > 3) all +127 and all -127."""
    rng = np.random.default_rng(seed)
    w = rng.integers(-top, top + 1, (m, k), dtype=np.int8)
    w[0], w[1] = top, -top
    a = rng.integers(-127, 128, (n, k), dtype=np.int8)
    a[0, k // 3:2 * k // 3], a[0, 2 * k // 3:] = 127, -127
    if n > 3:
        a[1], a[2] = 127, -127
    return w, a


@pytest.mark.parametrize("label", CHECKED_LABELS)
def test_checked_exact_in_the_python_engine(label):
    """Instruction by instruction in the Python engine at every level, on random inputs with the
    adversarial extremes mixed in (_mixed): GEMV (dense: |w| <= 64, so its AVX2 rows widen every
    step; trit5: K = 250, not a multiple of 20, copied into padded rows) and GEMM through tile and
    group remainders (dense, ternary: 13 rows, two 6-row tiles and one or three 4-row tiles and one,
    5 tokens, two pairs and one or a 4-token tile and one; trit5: 13 tokens, six pairs and one or
    AVX-512 groups of 12 and 4, K = 130)."""
    from tsar.simulate.native_kernel import simulate_native

    kernel = label.split("-")[0]
    gemv, gemm = {"dense": ((13, 256, 1, 64), (13, 128, 5, 1)),
                  "trit5": ((32, 250, 1, 1), (32, 130, 13, 1))}[kernel]
    for m, k, n, top in (gemv, gemm):
        w, a = _mixed(m, k, n, top, seed=m + k + n)
        run = simulate_native(label, m, k, n=n, weights=w, acts=a)
        assert run.exact, (m, k, n)
        assert run.weight_bytes == _checked_weight_bytes(kernel, m, k)


@pytest.mark.slow
@pytest.mark.parametrize("label", CHECKED_LABELS)
def test_checked_exact_in_the_python_engine_at_bitnet_widths(label):
    """As above at K = 2560 (dense: past its AVX2 rows' 64-step int16 windows of ternary weights;
    trit5: K a multiple of 20, read in place) and 2061 (trit5: padded), every small token count
    (2 and 3: dense's GEMV loop, trit5's 2- and 3-token AVX-512 blocks), GEMM of 16 and 25 tokens,
    and the extremes filled everywhere over K = 2048."""
    from tsar.simulate.native_kernel import simulate_native

    kernel = label.split("-")[0]
    runs = {"dense": [(7, 2560, 1, 1), (13, 2560, 5, 1), (13, 1024, 2, 64), (7, 576, 3, 1), (7, 576, 16, 1)],
            "trit5": [(32, 2061, 1, 1), (64, 2560, 2, 1), (32, 320, 3, 1), (32, 1013, 16, 1),
                      (32, 400, 25, 1)]}
    for m, k, n, top in runs[kernel]:
        w, a = _mixed(m, k, n, top, seed=m + k + n)
        assert simulate_native(label, m, k, n=n, weights=w, acts=a).exact, (m, k, n)
    top, m, k = (64, 7, 2048) if kernel == "dense" else (1, 32, 2048)
    w = np.repeat(np.resize(np.array([top, -top], np.int8), m)[:, None], k, axis=1)
    for acts in ([-127], [127, -127, -127, 127, -127]):
        a = np.repeat(np.array(acts, np.int8)[:, None], k, axis=1)
        assert simulate_native(label, m, k, n=len(acts), weights=w, acts=a).exact, acts
