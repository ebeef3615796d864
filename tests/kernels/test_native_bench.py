import pytest

from tsar.cli.main import main
from tsar.kernels import bench

pytestmark = pytest.mark.native


def test_run_case_cache_and_dram():
    bw = 10e9
    for where in ("cache", "dram"):
        r = bench.run_case(bench.Case("int2", 1, 64, 256, 1, where), bw, repeats=3, llc=1 << 20)
        assert r.seconds > 0 and r.gops > 0 and r.weight_bytes == 64 * 256 // 4
        assert r.roofline_pct == pytest.approx(100 * r.weight_gbs * 1e9 / bw)
    assert bench.last_level_cache_bytes() > 0


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
    assert "[1/2]" in out.err


@pytest.mark.parametrize("argv,msg", [(["--kernels", "tl9"], "unknown tl9"),
                                      (["--threads", "x"], "--threads"),
                                      (["--shapes", "1x2"], "--shapes")])
def test_command_errors(capsys, argv, msg):
    assert main(["bench-native", *argv]) == 1
    assert msg in capsys.readouterr().err
