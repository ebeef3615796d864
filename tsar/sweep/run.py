"""Design-space sweeps: ISA variants x models x platforms x threads x phases, as a tidy table.

A sweep spec is TOML::

    isa = "variants.toml"          # optional: an --isa file (path relative to the spec)
    variants = ["c2s4", "c2s4-i32"]  # registered configurations (the isa file's included)
    flows = ["op", "ap-tokens"]    # T-SAR dataflows each variant may use (fastest per layer)
    models = ["bitnet-125m"]
    platforms = ["laptop", "mobile"]
    threads = [0]                  # 0: the platform's own thread count
    phases = ["decode", "prefill"]

One *job* is (variant, model, platform, threads), for the platforms whose ISA has the variant's
width (:meth:`~tsar.isa.config.TsarConfig.runs_on`: 512-bit variants on AVX-512 platforms only):
:func:`tsar.estimate.model.evaluate` with the variant's kernels gives both phases, T-SAR and TL2
timed the same way (modelled against modelled). Jobs run on a ``concurrent.futures`` executor: a
local process pool, or a Dask ``distributed`` cluster through ``Client.get_executor()``; every
worker registers the variants from their definitions, so results do not depend on where a job ran.
Each job's rows are cached under ``cache_dir("sweep")`` by a content hash of the variant's
definition, its kernels, the model, platform (its full description), threads and the project
version, so reruns compute only new jobs.
Area comes from :mod:`tsar.sweep.area` (RTL synthesis) and is left empty where the RTL cannot build
the variant.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path

from tsar import __version__
from tsar.common.files import read_text
from tsar.common.toolchain import cache_dir, write_atomic
from tsar.errors import UserError
from tsar.isa.config import TsarConfig, get_config
from tsar.isa.isafile import load_isa_file, register_definitions
from tsar.kernels.tsar_plan import FLOWS, kernel_name, unsupported_reason
from tsar.sim.platforms import Platform

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

PHASES = ("decode", "prefill")
SPEC_KEYS = ("isa", "variants", "flows", "models", "platforms", "threads", "phases")
DESIGN_COLUMNS = tuple(f.name for f in fields(TsarConfig) if f.name not in ("name", "slot"))
"""A variant's design point: its configuration's fields but the name (the ``variant`` column) and
the encoding slot (which changes no result)."""
COLUMNS = ("variant", *DESIGN_COLUMNS, "bits_per_weight", "model", "platform", "threads", "phase",
           "tsar_kernel", "tsar", "tl2", "unit", "speedup", "native_kernel", "native", "speedup_native",
           "area_nand2", "area_overhead_pct")
_INT_COLUMNS = (*(f.name for f in fields(TsarConfig) if f.type in (int, "int")), "threads")
_FLOAT_COLUMNS = ("bits_per_weight", "tsar", "tl2", "speedup", "native", "speedup_native", "area_nand2",
                  "area_overhead_pct")
"""The tidy table's columns: one row per (variant, model, platform, threads, phase). ``tsar`` and
``tl2``: decode tokens/s or prefill seconds (128 tokens), per ``unit``; ``speedup`` > 1 when T-SAR
wins; ``native_kernel``, ``native``, ``speedup_native``: the best native kernel of the platform's
ISA over the whole model, its figure and T-SAR's speedup over it; ``area_*`` empty when the RTL does
not implement the variant."""


@dataclass(frozen=True)
class SweepSpec:
    variants: tuple[str, ...]
    models: tuple[str, ...]
    platforms: tuple[str, ...]
    threads: tuple[int, ...] = (0,)
    phases: tuple[str, ...] = PHASES
    flows: tuple[str, ...] = FLOWS
    isa: str | None = None


@dataclass(frozen=True)
class Job:
    """One evaluation: the variant's definition and the platform's description travel with it
    (workers register the variant and time on ``described``, so a platform that is measured, such
    as ``host``, is measured once by the caller and every job sees the same figures)."""

    definition: tuple[tuple[str, object], ...]
    kernels: tuple[str, ...]
    model: str
    platform: str
    threads: int
    described: Platform

    @property
    def variant(self) -> str:
        return str(dict(self.definition)["name"])


def load_spec(path: str | Path) -> SweepSpec:
    """Read a sweep spec (module docstring); UserError naming the file and key on bad input."""
    path = Path(path)
    try:
        raw = tomllib.loads(read_text(path, "a sweep spec (.toml)"))
    except tomllib.TOMLDecodeError as exc:
        raise UserError(f"{path}: {exc}") from None
    for key in raw:
        if key not in SPEC_KEYS:
            raise UserError(f"{path}: unknown key {key!r} (known: {', '.join(SPEC_KEYS)})")
    for key in ("variants", "models", "platforms"):
        if not raw.get(key) or not isinstance(raw[key], list):
            raise UserError(f"{path}: {key!r} must be a non-empty list")
    isa = raw.get("isa")
    if isa is not None:
        isa = str((path.parent / isa).resolve()) if not Path(isa).is_absolute() else isa
        load_isa_file(isa)
    spec = SweepSpec(tuple(raw["variants"]), tuple(raw["models"]), tuple(raw["platforms"]),
                     tuple(raw.get("threads", [0])), tuple(raw.get("phases", PHASES)),
                     tuple(raw.get("flows", FLOWS)), isa)
    bad = [p for p in spec.phases if p not in PHASES] + [f for f in spec.flows if f not in FLOWS]
    if bad:
        raise UserError(f"{path}: unknown phase or flow {bad[0]!r} (phases: {', '.join(PHASES)}; "
                        f"flows: {', '.join(FLOWS)})")
    if any(not isinstance(t, int) or isinstance(t, bool) or t < 0 for t in spec.threads):
        raise UserError(f"{path}: threads must be integers >= 0 (0: the platform's count)")
    from tsar.models import get_model

    for name in spec.variants:
        try:
            cfg = get_config(name)
        except KeyError as exc:
            raise UserError(f"{path}: {exc.args[0]}") from None
        reason = unsupported_reason(cfg)
        if reason:
            raise UserError(f"{path}: variant {name}: {reason}")
    for name in spec.models:
        try:
            get_model(name)
        except (KeyError, ValueError, UserError) as exc:
            raise UserError(f"{path}: {exc}") from None
    from tsar.estimate.layer import platform_named

    for name in spec.platforms:
        try:
            platform_named(name)
        except Exception as exc:
            raise UserError(f"{path}: platform {name!r}: {exc}") from None
    return spec


def jobs(spec: SweepSpec) -> list[Job]:
    """Every (variant, model, platform, threads) job, in a fixed order."""
    from tsar.estimate.layer import platform_named

    described = {name: platform_named(name) for name in spec.platforms}
    out = []
    for name in spec.variants:
        cfg = get_config(name)
        definition = tuple(cfg.definition().items())
        kernels = tuple(kernel_name(cfg, flow) for flow in spec.flows)
        for model in spec.models:
            for platform in spec.platforms:
                if not cfg.runs_on(described[platform].core.isa):
                    continue  # a width the platform's ISA lacks (512 bits without AVX-512)
                for threads in spec.threads:
                    out.append(Job(definition, kernels, model, platform, threads, described[platform]))
    return out


def job_key(job: Job) -> str:
    """Content hash of what a job's result depends on: the variant's definition, its kernels, the
    model, the platform's description, threads, the project version and the table's columns."""
    platform = hashlib.sha256(repr(job.described).encode()).hexdigest()[:16]
    text = json.dumps({"definition": dict(job.definition), "kernels": job.kernels, "model": job.model,
                       "platform": platform, "threads": job.threads, "version": __version__,
                       "columns": COLUMNS},
                      sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def run_job(job: Job) -> list[dict]:
    """Evaluate one job (in any process): register the variant, then the model estimate with the
    variant's kernels; one row per phase (area columns filled later)."""
    register_definitions([dict(job.definition)])
    from tsar.estimate.model import evaluate

    est = evaluate(job.model, job.described, threads=job.threads or None, tsar_kernels=job.kernels)
    cfg = TsarConfig(**dict(job.definition))
    base = {"variant": cfg.name, **{k: getattr(cfg, k) for k in DESIGN_COLUMNS},
            "bits_per_weight": cfg.bits_per_weight, "model": job.model, "platform": job.platform,
            "threads": est.threads}
    decode_kernels = sorted({e.tsar_kernel for e in est.per_layer})
    native_decode, native_prefill = est.best_native("decode"), est.best_native("prefill")
    prefill_kernels = sorted({e.tsar_prefill_kernel for e in est.per_layer})
    return [
        {**base, "phase": "decode", "tsar_kernel": "+".join(decode_kernels), "tsar": est.decode_tsar_tps,
         "tl2": est.decode_tl2_tps, "unit": "tok/s", "speedup": est.decode_tsar_tps / est.decode_tl2_tps,
         "native_kernel": native_decode[0], "native": native_decode[1],
         "speedup_native": est.decode_tsar_tps / native_decode[1]},
        {**base, "phase": "prefill", "tsar_kernel": "+".join(prefill_kernels),
         "tsar": est.prefill_seconds("tsar"), "tl2": est.prefill_seconds("tl2"), "unit": "s",
         "speedup": est.prefill_seconds("tl2") / est.prefill_seconds("tsar"),
         "native_kernel": native_prefill[0], "native": native_prefill[1],
         "speedup_native": native_prefill[1] / est.prefill_seconds("tsar")},
    ]


def _cached(job: Job) -> list[dict] | None:
    path = cache_dir("sweep") / f"{job_key(job)}.json"
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def _store(job: Job, rows: list[dict]) -> None:
    path = cache_dir("sweep") / f"{job_key(job)}.json"
    write_atomic(path, json.dumps(rows))


def make_executor(dask: str | None, workers: int | None) -> tuple[cf.Executor, Callable[[], None]]:
    """The executor and its shutdown: a local process pool (``dask`` None), a Dask LocalCluster
    (``local:N``) or an existing Dask scheduler (``ADDRESS``)."""
    if dask is None:
        pool = cf.ProcessPoolExecutor(max_workers=workers or os.cpu_count() or 1)
        return pool, lambda: pool.shutdown(wait=True)
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise UserError("--dask needs the optional 'dask' extra (pip install 'tsar[dask]')") from None
    if dask.startswith("local:"):
        try:
            n = int(dask.split(":", 1)[1])
            assert n > 0
        except (ValueError, AssertionError):
            raise UserError(f"--dask {dask}: expected local:N with N >= 1") from None
        cluster = LocalCluster(n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None)
        client = Client(cluster)

        def close() -> None:
            client.close()
            cluster.close()
    else:
        try:
            client = Client(dask, timeout="20s")
        except (OSError, TimeoutError) as exc:
            raise UserError(f"--dask {dask}: cannot reach the scheduler: {exc}") from None
        close = client.close
    return client.get_executor(pure=False), close


def run_sweep(spec: SweepSpec, *, dask: str | None = None, workers: int | None = None,
              use_cache: bool = True, with_area: bool = True,
              progress: Callable[[str], None] | None = None) -> list[dict]:
    """Every row of the sweep (:data:`COLUMNS`), sorted; only jobs not in the cache are computed."""
    say = progress or (lambda _m: None)
    todo = jobs(spec)
    rows: list[dict] = []
    missing: list[Job] = []
    for job in todo:
        hit = _cached(job) if use_cache else None
        (rows.extend(hit) if hit is not None else missing.append(job))
    say(f"{len(todo)} jobs, {len(todo) - len(missing)} cached, {len(missing)} to compute")
    if missing:
        executor, close = make_executor(dask, workers)
        start = time.monotonic()
        try:
            futures = {executor.submit(run_job, job): job for job in missing}
            for done, fut in enumerate(cf.as_completed(futures), 1):
                job = futures[fut]
                result = fut.result()
                _store(job, result)
                rows.extend(result)
                elapsed = time.monotonic() - start
                eta = elapsed / done * (len(missing) - done)
                say(f"[{done}/{len(missing)}] {job.variant} {job.model} {job.platform}: "
                    f"{elapsed:.0f} s elapsed, ETA {eta:.0f} s")
        finally:
            close()
    rows = [r for r in rows if r["phase"] in spec.phases]
    if with_area:
        from tsar.sweep.area import area_columns

        areas = area_columns(spec.variants, progress=say)
        for r in rows:
            r.update(areas.get(r["variant"], {}))
    for r in rows:
        for col in COLUMNS:
            r.setdefault(col, None)
    rows.sort(key=lambda r: (r["variant"], r["model"], r["platform"], r["threads"], r["phase"]))
    return [{col: r[col] for col in COLUMNS} for r in rows]


def write_csv(rows: Sequence[dict], path: Path) -> None:
    import csv

    with path.open("w", newline="") as f:
        out = csv.DictWriter(f, fieldnames=COLUMNS)
        out.writeheader()
        for r in rows:
            out.writerow({k: ("" if v is None else repr(v) if isinstance(v, float) else v)
                          for k, v in r.items()})


def read_csv(path: Path) -> list[dict]:
    """Rows of a sweep CSV with numbers parsed (empty cells are None)."""
    import csv
    import io

    reader = csv.DictReader(io.StringIO(read_text(path, "a sweep table (.csv)"), newline=""))
    try:
        if reader.fieldnames is None or set(COLUMNS) - set(reader.fieldnames):
            raise UserError(f"{path}: not a sweep table (expected columns {', '.join(COLUMNS)})")
        rows = list(reader)
    except csv.Error as exc:
        raise UserError(f"{path}: not a sweep table ({exc})") from None
    for r in rows:
        for k, v in r.items():
            if v == "":
                r[k] = None
            elif k in _INT_COLUMNS:
                r[k] = int(v)
            elif k in _FLOAT_COLUMNS:
                r[k] = float(v)
    return rows


def write_parquet(rows: Sequence[dict], path: Path) -> bool:
    """Write Parquet when pyarrow is installed; returns whether it was written."""
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        return False
    pq.write_table(pa.Table.from_pylist(list(rows)), path)
    return True


__all__ = [
    "COLUMNS",
    "Job",
    "SweepSpec",
    "job_key",
    "jobs",
    "load_spec",
    "read_csv",
    "run_job",
    "run_sweep",
    "write_csv",
    "write_parquet",
]
