"""``tsar sweep``: spec checking, the Pareto front, and a small sweep on the local process pool and on
a Dask LocalCluster giving identical tables (slow tier: it simulates a whole model per variant)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tsar.errors import UserError
from tsar.isa.config import configs, unregister_config
from tsar.sweep.report import pareto, write_sweep_report
from tsar.sweep.run import COLUMNS, jobs, load_spec, read_csv, run_sweep, write_csv

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


def test_wide_variants_run_where_the_platform_has_avx512(tmp_path):
    """A 512-bit variant gets jobs on the AVX-512 platforms only (the Mobile is AVX2)."""
    body = ('variants = ["c2s4", "c2s4-512", "c4s4-512"]\nflows = ["op"]\nmodels = ["bitnet-125m"]\n'
            'platforms = ["workstation", "laptop", "mobile"]\n')
    got = [(j.variant, j.platform) for j in jobs(load_spec(_spec(tmp_path, body)))]
    assert got == [("c2s4", "workstation"), ("c2s4", "laptop"), ("c2s4", "mobile"),
                   ("c2s4-512", "workstation"), ("c2s4-512", "laptop"),
                   ("c4s4-512", "workstation"), ("c4s4-512", "laptop")]


def test_jobs_carry_the_platform_described_once(tmp_path, monkeypatch):
    """A platform is resolved once per sweep (the host is measured once, not by every worker), its
    description travels with each job, keys the cache, and is what the job is timed on."""
    import dataclasses

    import tsar.estimate.layer
    import tsar.estimate.model
    from tsar.sweep.run import job_key, run_job

    calls = []
    real = tsar.estimate.layer.platform_named
    monkeypatch.setattr(tsar.estimate.layer, "platform_named", lambda name: calls.append(name) or real(name))
    js = jobs(load_spec(_spec(tmp_path, SMALL)))
    assert calls.count("laptop") == 2  # once checking the spec, once for all the jobs
    assert js[0].described is js[1].described and js[0].described.name == "laptop"
    faster = dataclasses.replace(js[0], described=dataclasses.replace(
        js[0].described, core=dataclasses.replace(js[0].described.core, frequency_ghz=9.0)))
    assert job_key(faster) != job_key(js[0])
    seen = []

    class Stop(Exception):
        pass

    def fake_evaluate(model, platform, **_kw):
        seen.append(platform)
        raise Stop

    monkeypatch.setattr(tsar.estimate.model, "evaluate", fake_evaluate)
    with pytest.raises(Stop):
        run_job(faster)
    assert seen == [faster.described] and seen[0].core.frequency_ghz == 9.0


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
    # the host is measured once per sweep and its description sent to the workers, so its rows
    # agree too (each worker measuring the host itself gave different tables)
    spec = load_spec(_spec(tmp_path, SMALL.replace('["laptop"]', '["laptop", "host"]')))
    pool = run_sweep(spec, workers=2, use_cache=False, with_area=False)
    dask = run_sweep(spec, dask="local:2", use_cache=False, with_area=False)
    assert pool == dask and len(pool) == 8
    assert {r["phase"] for r in pool} == {"decode", "prefill"} and all(r["tsar"] > 0 for r in pool)
    seen = []
    again = run_sweep(spec, with_area=False, progress=seen.append)  # everything from the cache
    assert again == pool and "0 to compute" in seen[0]
    write_csv(pool, tmp_path / "r.csv")
    rows = read_csv(tmp_path / "r.csv")
    assert rows == pool and list(rows[0]) == list(COLUMNS)
    page = write_sweep_report(tmp_path / "r.html", rows, "r.csv")
    assert page.read_text().count("<img") == 2  # one Pareto plot per platform


def test_label_rows_stack_labels_of_coincident_points():
    from tsar.sweep.report import label_rows

    # three variants at the same (prefill, decode) point, one apart, one near only in x
    points = [(0.095, 496.0), (0.0951, 496.2), (0.0952, 496.1), (0.187, 496.0), (0.0951, 594.0)]
    assert label_rows(points) == [0, 1, 2, 0, 0]
    assert label_rows([]) == [] and label_rows([(1.0, 1.0)]) == [0]
