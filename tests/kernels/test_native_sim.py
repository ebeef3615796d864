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


def test_entry_points_and_no_avx512(sim_lib):
    import subprocess
    for name in simbuild.ENTRY_POINTS:
        assert hasattr(sim_lib, name)
    dis = subprocess.run(["objdump", "-d", sim_lib._name], capture_output=True, text=True).stdout
    assert "zmm" not in dis and "%k" not in dis.replace("%rdx", "")


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
    from tsar.native_sim import simulate_native

    for n in (2, 5):
        assert simulate_native(fmt, 64, 384, n=n).exact, n
