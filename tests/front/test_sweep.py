"""``tsar sweep``: spec checking, the Pareto front, and a small sweep on the local process pool and on
a Dask LocalCluster giving identical tables (slow tier: it simulates a whole model per variant)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsar.errors import UserError
from tsar.isa.config import configs, unregister_config
from tsar.sweep import COLUMNS, jobs, load_spec, read_csv, run_sweep, write_csv
from tsar.sweep_report import pareto, write_sweep_report

VARIANTS = Path(__file__).resolve().parents[2] / "docs" / "dse" / "variants.toml"


@pytest.fixture(autouse=True, scope="module")
def _unregister_loaded_variants():
    """Specs load the variants file; leave the registry (16 encoding slots) as it was."""
    before = {cfg.name for cfg in configs()}
    yield
    for cfg in configs():
        if cfg.name not in before:
            unregister_config(cfg.name)


def _spec(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "spec.toml"
    path.write_text(f'isa = "{VARIANTS}"\n' + body)
    return path


SMALL = ('variants = ["c2s4", "c2s4-i32"]\nflows = ["op"]\nmodels = ["bitnet-125m"]\n'
         'platforms = ["laptop"]\n')


def test_spec_and_jobs(tmp_path):
    spec = load_spec(_spec(tmp_path, SMALL))
    js = jobs(spec)
    assert [j.variant for j in js] == ["c2s4", "c2s4-i32"]
    assert js[1].kernels == ("tsar-c2s4-i32-op",) and dict(js[1].definition)["acc_bits"] == 32


@pytest.mark.parametrize(("body", "message"), [
    (SMALL + "colour = 1\n", "unknown key 'colour'"),
    (SMALL.replace('["c2s4", "c2s4-i32"]', '["c9"]'), "unknown T-SAR configuration 'c9'"),
    (SMALL.replace('["op"]', '["diag"]'), "unknown phase or flow 'diag'"),
    (SMALL.replace('["laptop"]', '["moon"]'), "platform 'moon'"),
    (SMALL.replace('["bitnet-125m"]', "[]"), "'models' must be a non-empty list"),
    (SMALL + "threads = [-1]\n", "threads must be integers"),
])
def test_bad_specs(tmp_path, body, message):
    with pytest.raises(UserError, match=message):
        load_spec(_spec(tmp_path, body))


def test_pareto_front():
    points = [(1.0, 10.0), (2.0, 20.0), (2.0, 15.0), (0.5, 5.0), (3.0, 19.0)]
    assert pareto(points) == [3, 0, 1]


@pytest.mark.slow
def test_pool_and_local_cluster_give_identical_tables(tmp_path):
    pytest.importorskip("distributed")
    spec = load_spec(_spec(tmp_path, SMALL))
    pool = run_sweep(spec, workers=2, use_cache=False, with_area=False)
    dask = run_sweep(spec, dask="local:2", use_cache=False, with_area=False)
    assert pool == dask and len(pool) == 4
    assert {r["phase"] for r in pool} == {"decode", "prefill"} and all(r["tsar"] > 0 for r in pool)
    seen = []
    again = run_sweep(spec, with_area=False, progress=seen.append)  # everything from the cache
    assert again == pool and "0 to compute" in seen[0]
    write_csv(pool, tmp_path / "r.csv")
    rows = read_csv(tmp_path / "r.csv")
    assert rows == pool and list(rows[0]) == list(COLUMNS)
    page = write_sweep_report(tmp_path / "r.html", rows, "r.csv")
    assert page.read_text().count("<img") == 1
