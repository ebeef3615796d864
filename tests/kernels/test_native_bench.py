import itertools

import pytest

from tsar.cli.main import main
from tsar.kernels import bench

pytestmark = pytest.mark.native


def test_run_case_cache_and_dram():
    bw = 10e9
    for where in ("cache", "dram"):
        r = bench.run_case(bench.Case("int2", 1, 64, 256, 1, where), bw, repeats=3, llc=1 << 20, index=3)
        assert r.seconds > 0 and r.gops > 0 and r.weight_bytes == 64 * 256 // 4
        if where == "dram":
            assert r.roofline_pct == pytest.approx(100 * r.weight_gbs * 1e9 / bw)
        else:  # weights in cache are not read from memory: no % of the memory bandwidth
            assert r.roofline_pct is None
    assert bench.last_level_cache_bytes() > 0


def test_format_table_shows_bw_only_for_dram():
    case = bench.Case("dense", 1, 2560, 2560, 1, "cache")
    fast = bench.Result(case, "avx512", 1e-5, 2560 * 2560, 30e9)  # 655 GB/s from cache
    slow = bench.Result(bench.Case("dense", 1, 2560, 2560, 1, "dram"), "avx512", 5e-4, 2560 * 2560, 30e9)
    rows = bench.format_table({1: 30e9}, [fast, slow]).splitlines()
    header = rows[1]
    col = slice(header.index("GB/s") + 4, header.index("% BW") + 4)
    assert rows[2][col].strip() == "-" and float(rows[3][col]) == pytest.approx(43.7, abs=0.1)


def test_format_table_warns_of_dram_rows_above_the_bandwidth():
    ok = bench.Result(bench.Case("int2", 1, 2560, 2560, 1, "dram"), "avx512", 1e-4, 1638400, 30e9)
    cached = bench.Result(bench.Case("dense", 1, 2560, 2560, 1, "dram"), "avx512", 1e-4, 2560 * 2560, 30e9)
    assert "warning" not in bench.format_table({1: 30e9}, [ok])
    last = bench.format_table({1: 30e9}, [ok, cached]).splitlines()[-1]
    assert last.startswith("warning: 1 dram row(s) faster than the measured streaming bandwidth "
                           "(dense 218 %)")


@pytest.mark.parametrize("nbytes", [1, 1000, 1 << 20, 3 << 20, 8 << 20, 33 << 20, 200 << 20])
@pytest.mark.parametrize("llc", [1 << 20, 32 << 20, 96 << 20])
def test_dram_rotation_exceeds_four_times_the_last_level_cache(nbytes, llc):
    """DESIGN.md: a DRAM measurement must rotate over more than 4x the L3, or contenders read each
    other's cached copies."""
    copies = bench.dram_copies(nbytes, llc)
    assert copies >= 2 and copies * nbytes > 4 * llc and bench.DRAM_FACTOR >= 4
    assert (copies - 1) * nbytes <= 4 * llc or copies == 2  # and not more than needed


def test_rotation_starts_are_spread():
    for copies in (2, 7, 80, 1000):
        starts = [bench.rotation_start(i, copies) for i in range(12)]
        assert all(0 <= s < copies for s in starts)
        if copies >= 12:  # successive measurements start at distinct copies, far apart
            assert len(set(starts)) == 12
            assert min(abs(a - b) for a, b in itertools.pairwise(starts)) >= copies // 5
    assert bench.rotation_start(5, 1) == 0


def test_expected_cost_grows_with_the_work():
    cost = bench.expected_cost
    small, big = bench.Case("tl2", 1, 2560, 2560, 1, "cache"), bench.Case("tl2", 1, 6912, 2560, 1, "cache")
    assert cost(big, 50) / cost(small, 50) == pytest.approx(6912 / 2560)
    gemm = bench.Case("tl2", 128, 2560, 2560, 1, "cache")
    assert cost(gemm, 50) > 10 * cost(small, 50)
    assert cost(bench.Case("tl2", 1, 2560, 2560, 2, "cache"), 50) < cost(small, 50)


def test_default_cases():
    cases = bench.default_cases(["tl2"], (1, 2))
    assert len(cases) == 2 * (3 * 2 + 1)
    assert any(c.n == bench.GEMM_N for c in cases)
    assert len(bench.default_cases(["tl2"], (1,), quick=True)) == 2


def test_command(capsys):
    rc = main(["bench-native", "--kernels", "i2s,tl2", "--shapes", "1x64x384", "--threads", "1",
               "--where", "cache", "--repeats", "3"])
    out = capsys.readouterr()
    assert rc == 0
    assert "streaming-read bandwidth" in out.out and "1x64x384" in out.out
    assert "measuring the streaming-read bandwidth" in out.err and "[1/2]" in out.err
    assert "\r" not in out.err


@pytest.mark.parametrize("argv,msg", [(["--kernels", "tl9"], "unknown tl9"),
                                      (["--threads", "x"], "--threads"),
                                      (["--shapes", "1x2"], "--shapes")])
def test_command_errors(capsys, argv, msg):
    assert main(["bench-native", *argv]) == 1
    assert msg in capsys.readouterr().err
