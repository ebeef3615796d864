"""``tsar uarch measure``: the generated chains and streams, native timing on the host, the measured
table's file, cache and loader, the host platform's use of it, the agreement report, port pairing
and the command's errors."""

from __future__ import annotations

import json
import os

import iced_x86 as iced
import pytest

import tsar.sim.uarch as uarch
from tsar.cli.main import main
from tsar.sim.platforms import detect
from tsar.sim.uarch import agreement, pairing
from tsar.sim.uarch.forked import TaskFailed, run_isolated
from tsar.sim.uarch.loops import BUFFER_BYTES, LoopRunner, loop_offset, program
from tsar.sim.uarch.measure import QUICK_FORMS, Settings, measure, select_forms
from tsar.sim.uarch.measure_rows import comparable, table_rows
from tsar.sim.uarch.measured import TableRow, cache_path, write_table
from tsar.sim.uarch.microbench import plan
from tsar.sim.x86.forms import all_forms

FORMS = {f.name: f for f in all_forms()}
FLAGS = detect.cpu_flags()
_A = iced.OpAccess
_WRITE = {_A.WRITE, _A.READ_WRITE, _A.COND_WRITE, _A.READ_COND_WRITE}
_READ = {_A.READ, _A.READ_WRITE, _A.COND_READ, _A.READ_COND_WRITE}
_FULL = iced.RegisterExt.full_register
native = pytest.mark.skipif(not {"avx2", "fma"} <= FLAGS or not hasattr(os, "sched_setaffinity"),
                            reason="needs an x86-64 Linux host with AVX2 and FMA")


def _regs(code: bytes) -> tuple[set[int], set[int], list[tuple[int, int]]]:
    """(registers read, registers written, memory accesses (displacement, bytes)) of one instruction."""
    ins = iced.Decoder(64, code).decode()
    assert ins.code != iced.Code.INVALID and ins.len == len(code)
    info = iced.InstructionInfoFactory().info(ins)
    reads, writes = set(), set()
    for i in range(ins.op_count):
        if ins.op_kind(i) == iced.OpKind.REGISTER:
            reg = _FULL(ins.op_register(i))
            if info.op_access(i) in _READ:
                reads.add(reg)
            if info.op_access(i) in _WRITE:
                writes.add(reg)
    mem = [(m.displacement, iced.MemorySizeExt.size(m.memory_size)) for m in info.used_memory()]
    return reads, writes, mem


CHAIN_FORMS = ["VEX_VPADDD_YMM_YMM_YMMM256", "VEX_VPMULLD_YMM_YMM_YMMM256", "VEX_VPDPBUSD_YMM_YMM_YMMM256",
               "VEX_MULX_R64_R64_RM64", "VEX_KANDW_KR_KR_KR", "EVEX_VPERMT2D_ZMM_K1Z_ZMM_ZMMM512B32"]


@pytest.mark.parametrize(("name", "memory"), [(n, m) for n in CHAIN_FORMS for m in (False, True)
                                              if not m or FORMS[n].has_memory])
def test_chains_link_every_instruction_to_the_next(name: str, memory: bool) -> None:
    p = plan(FORMS[name], memory)
    if memory and not p.chain_sources:  # mulx r64, r64, m64: its only register source is rdx
        assert p.no_latency.startswith("no source of the destination's register class")
        return
    assert p.chain_sources, p.no_latency
    for source in p.chain_sources:
        period = p.chain(source)
        for i, code in enumerate(period):
            _, written, mem = _regs(code)
            reads_next, _, _ = _regs(period[(i + 1) % len(period)])
            assert written & reads_next, f"{name}: {iced.Decoder(64, code).decode()} feeds nothing"
            assert all(d >= 0 and d + n <= BUFFER_BYTES for d, n in mem)
        if len(period) == 2:  # through another operand: no instruction reads what it writes
            for code in period:
                reads, written, _ = _regs(code)
                assert not (reads & written) or p.dest.read


@pytest.mark.parametrize("name", ["VEX_VPADDD_YMM_YMM_YMMM256", "VEX_VPDPBUSD_YMM_YMM_YMMM256",
                                  "VEX_VMOVDQU_YMMM256_YMM", "EVEX_VPCMPD_KR_K1_ZMM_ZMMM512B32_IMM8",
                                  "VEX_BZHI_R64_RM64_R64"])
@pytest.mark.parametrize("memory", [False, True])
def test_streams_are_independent(name: str, memory: bool) -> None:
    p = plan(FORMS[name], memory)
    period = p.stream()
    assert len(period) >= 8 or p.dest.cls == "k" or p.dest.cls == "gpr"
    decoded = [_regs(code) for code in period]
    dests = [w for _, w, _ in decoded]
    if p.dest is not None:
        assert len({frozenset(d) for d in dests}) == len(period)  # distinct destinations
    written = set().union(*dests)
    for reads, writes, mem in decoded:
        assert not (reads - writes) & written  # sources the loop never writes (read-write dest aside)
        assert all(d >= 0 and d + n <= BUFFER_BYTES for d, n in mem)


def test_forms_without_a_chain_say_why() -> None:
    store = plan(FORMS["VEX_VMOVDQU_YMMM256_YMM"], True)
    assert store.no_latency == "stores to memory: no register result" and not store.chain_sources
    cmp = plan(FORMS["EVEX_VPCMPD_KR_K1_ZMM_ZMMM512B32_IMM8"], False)
    assert "register class (k)" in cmp.no_latency
    ptest = plan(FORMS["VEX_VPTEST_YMM_YMMM256"], False)
    assert ptest.no_latency == "result only in flags"
    gather = plan(FORMS["VEX_VPGATHERDD_YMM_VM32Y_YMM"], True)
    assert gather.skip.startswith("gather/scatter")


def test_program_is_an_aligned_counted_loop() -> None:
    body = plan(FORMS["VEX_VPADDD_YMM_YMM_YMMM256"], False).stream() * 2
    code = program(b"".join(body))
    start = loop_offset()
    assert start % 64 == 0
    dec = iced.Decoder(64, code[start:], ip=start)
    decoded = [dec.decode() for _ in range(len(body) + 2)]
    assert all(str(i).startswith("vpaddd ymm") for i in decoded[:-2])
    assert str(decoded[-2]) == "dec r15"
    assert decoded[-1].mnemonic == iced.Mnemonic.JNE and decoded[-1].near_branch_target == start


def test_a_faulting_task_costs_that_task_only() -> None:
    def illegal() -> int:
        runner = LoopRunner(slots=1, slot_bytes=4096)
        runner.load(0, program(bytes.fromhex("0f0b")))  # ud2
        return runner.run(0, 1)

    out = dict(run_isolated([lambda: 1, illegal, lambda: 3], timeout=30))
    assert out[0] == 1 and out[2] == 3
    assert isinstance(out[1], TaskFailed) and "SIGILL" in out[1].reason


def test_selection_errors_are_user_errors() -> None:
    from tsar.errors import UserError

    with pytest.raises(UserError, match="matches no supported form"):
        select_forms(FLAGS, "zzzz")
    with pytest.raises(UserError, match="not a regular expression"):
        select_forms(FLAGS, "(")
    with pytest.raises(UserError, match="unknown extension"):
        select_forms(FLAGS, extensions=["AVX9"])
    # vpdpbusd (AVX-VNNI) on a CPU without avx_vnni: refused with the reason
    with pytest.raises(UserError, match="does not execute AVX_VNNI"):
        select_forms(FLAGS - {"avx_vnni"}, "vpdpbusd", extensions=["AVX_VNNI"])
    assert not [f for f in select_forms(FLAGS - {"avx_vnni"} | {"avx2"}, "vpdpbusd")
                if f.extension == "AVX_VNNI"]


@pytest.fixture(scope="module")
def quick():
    """A quick measurement of the well-known forms on the host (about a second)."""
    forms = select_forms(FLAGS, quick=True)
    m = measure(forms, detect.cpu_identity(), Settings(trials=3, target_ticks=50_000),
                base=uarch.load("alderlakep"), flags=FLAGS)
    return m, {r.key: r for r in m.results}


@native
def test_quick_measurement_is_plausible(quick) -> None:
    m, by_key = quick
    add = by_key[("vpaddd", ("ymm", "ymm", "ymm"))]
    mul = by_key[("vpmulld", ("ymm", "ymm", "ymm"))]
    assert add.latency.value == pytest.approx(1.0, abs=0.2)
    assert 0.2 <= add.throughput.value <= 0.6
    assert mul.latency.value > add.latency.value + 2
    fma = by_key[("vfmadd231ps", ("ymm", "ymm", "ymm"))]
    assert 3 <= fma.latency.value <= 6
    mem = by_key[("vpaddd", ("ymm", "ymm", "m256"))]
    assert mem.latency_max == pytest.approx(mem.latency.value + m.load_to_use["ymm"])
    assert 3 <= m.load_to_use["scalar"] <= 8 and 0.5 < m.core_ghz < 8
    vnni = ("vpdpbusd", ("ymm", "ymm", "ymm"))
    if "avx_vnni" in FLAGS:
        assert by_key[vnni].latency.value >= 2
    else:
        assert vnni not in by_key
    assert not [r for r in m.results if r.failed]


@native
def test_rows_round_trip_through_the_loader(quick, tmp_path) -> None:
    m, _ = quick
    base = uarch.load("alderlakep")
    rows = table_rows(m, base)
    path = tmp_path / "measured.csv"
    assert write_table(rows, path, {"base": "alderlakep", "cpu": m.cpu.name}) == len(rows)
    loaded = uarch.load_table(path)
    assert loaded.core == base.core
    for row in rows:
        t = loaded.lookup(row.mnemonic, row.operands)
        assert t.exact and t.data_source.startswith("measured:")
        assert (t.latency, t.recip_throughput, t.uops) == (row.latency, row.recip_throughput, row.uops)
        assert t.ports == pytest.approx(dict(row.ports)) and t.notes == row.notes
    assert loaded.lookup("add", ("r64", "r64")) == base.lookup("add", ("r64", "r64"))  # from the base
    assert uarch.load(str(path)).lookup("vpaddd", ("ymm", "ymm", "ymm")).data_source.startswith("measured:")


def test_a_table_without_a_base_is_refused(tmp_path) -> None:
    path = tmp_path / "t.csv"
    write_table([_row("vpaddd", 1.0, 0.33)], path, {})
    path.with_suffix(".json").unlink()
    with pytest.raises(uarch.UarchTableError, match="no base table"):
        uarch.load_table(path)
    path.write_text("a,b\n1,2\n")
    with pytest.raises(uarch.UarchTableError, match="not an instruction table"):
        uarch.load_table(path, base="zen4")


def _row(mnemonic: str, lat: float | None, tp: float | None, ops=("ymm", "ymm", "ymm")) -> TableRow:
    return TableRow(mnemonic, ops, lat, lat, tp, 1.0, {"p015": 1.0}, "derived", "AVX2", "measured:test")


def test_agreement_per_form_and_summary() -> None:
    adl = uarch.load("alderlakep")
    rows = [_row("vpaddd", 1.02, 0.34), _row("vpmulld", 10.0, 1.5), _row("vpshufb", 3.0, 0.5),
            _row("nosuch", 1.0, 1.0)]
    found = agreement.compare([r.timing() for r in rows], adl)
    by = {a.mnemonic: a for a in found}
    assert set(by) == {"vpaddd", "vpmulld", "vpshufb"}  # forms the table lacks are not compared
    assert by["vpaddd"].agrees and by["vpaddd"].latency_ratio == pytest.approx(1.02)
    assert by["vpmulld"].latency_agrees and by["vpmulld"].throughput_agrees is False
    assert by["vpshufb"].latency_agrees is False and by["vpshufb"].throughput_agrees
    s = agreement.summary(found)
    assert s["forms"] == 3 and s["forms_agree"] == 1
    assert s["latency"]["agree"] == 2 and s["throughput"]["compared"] == 3
    assert agreement.within(1.0, 1.4, 0.1, 0.5) and not agreement.within(0.33, 0.5, 0.1, 0.05)


def test_latencies_no_chain_measured_are_not_compared() -> None:
    pure_load = TableRow("vmovdqu", ("ymm", "m256"), 0.0, 7.0, 0.33, 1.0, {}, "derived", "AVX", "m",
                         latency_how="load")
    (t,) = comparable([pure_load])
    assert t.latency is None and t.recip_throughput == 0.33


def test_pairing_infers_port_groups() -> None:
    ports = ("p0", "p1", "p5")
    mix = pairing.Mix

    def period(k: int, j: int, x_tp: float, size: int | None) -> float:  # the model of the docstring
        return max(j * 1.0, k * x_tp) if size is None else max(j * 1.0, k * x_tp + j * 1.0 / size)

    # vpaddd-like (p015, 0.33 c): slows both blockers, by 1 + 1/3
    k, j = pairing.counts(1 / 3, 1.0, None)
    m = {p: mix(period(k, j, 1 / 3, 3), k, j, 1.0) for p in ("p0", "p5")}
    assert pairing.infer(m, m, ports, 1 / 3, "p") == {"p015": 1.0}
    # vpshufb-like (p15, 0.5 c): slows the p5 blocker only, by 1 + 1/2
    k, j = pairing.counts(0.5, 1.0, None)
    m = {"p0": mix(period(k, j, 0.5, None), k, j, 1.0), "p5": mix(period(k, j, 0.5, 2), k, j, 1.0)}
    assert pairing.infer(m, m, ports, 0.5, "p") == {"p15": 1.0}
    # vpermd-like (p5, 1 c)
    m = {"p0": mix(period(4, 4, 1.0, None), 4, 4, 1.0), "p5": mix(period(4, 4, 1.0, 1), 4, 4, 1.0)}
    assert pairing.infer(m, m, ports, 1.0, "p") == {"p5": 1.0}
    assert pairing.infer({"p0": m["p0"]}, m, ports, 1.0, "p") is None  # a mix missing: unresolved


def test_pairing_mix_keeps_blocker_registers_encodable() -> None:
    x = plan(FORMS["EVEX_VPDPBUSD_ZMM_K1Z_ZMM_ZMMM512B32"], False)
    b = plan(FORMS["VEX_VPERMD_YMM_YMM_YMMM256"], False)
    k, j, body = pairing.fit(x, b, 0.5, 1.0, 5.0)
    assert k * 0.5 >= 1.1 * 5.0 and len(body) == k + j
    texts = [str(iced.Decoder(64, c).decode()) for c in body]
    assert sum(t.startswith("vpermd") for t in texts) == j
    assert len({t.split(",")[0] for t in texts if t.startswith("vpdpbusd")}) == k  # distinct accumulators


def test_host_uses_a_measured_table_for_a_proxy_core(monkeypatch, tmp_path) -> None:
    monkeypatch.setenv("TSAR_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(detect, "_HOST", {})
    ident = detect.cpu_identity()
    monkeypatch.setattr(detect, "uarch_for_cpu", lambda *a: ("alderlakep", True, "a proxy"))
    assert detect.host(measure=False).core.uarch == "alderlakep"  # nothing measured yet
    path = cache_path(ident.key)
    write_table([_row("vpaddd", 1.0, 0.25)], path, {"base": "alderlakep"})
    plat = detect.host(measure=False, refresh=True)
    assert plat.core.uarch == str(path) and not plat.core.uarch_proxy
    assert "tsar uarch measure" in plat.core.uarch_note and "a proxy" in plat.core.uarch_note
    assert plat.uarch().lookup("vpaddd", ("ymm", "ymm", "ymm")).recip_throughput == 0.25
    monkeypatch.setattr(detect, "uarch_for_cpu", lambda *a: ("alderlakep", False, "published"))
    assert detect.host(measure=False, refresh=True).core.uarch == "alderlakep"  # a published table wins


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--compare", "zen9"], "--compare 'zen9': unknown table"),
    (["--base", "nosuch"], "--base 'nosuch': unknown table"),
    (["--forms", "zzzz"], "matches no supported form"),
    (["--forms", "(["], "not a regular expression"),
    (["--extensions", "AVX9"], "unknown extension"),
])
def test_bad_input_is_one_line(argv, fragment, capsys) -> None:
    assert main(["uarch", "measure", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert fragment in err and len(err.splitlines()) == 1 and "Traceback" not in err


@native
def test_command_writes_the_table_and_reports_agreement(tmp_path, capsys) -> None:
    out = tmp_path / "host.csv"
    assert main(["-q", "uarch", "measure", "--quick", "--trials", "2", "--out", str(out),
                 "--compare", "alderlakep", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["kind"] == "uarch-measure" and doc["out"] == str(out)
    forms = {(f["mnemonic"], tuple(f["operands"])) for f in doc["forms"]}
    assert ("vpaddd", ("ymm", "ymm", "ymm")) in forms
    assert doc["comparison"]["table"] == "alderlakep" and doc["comparison"]["summary"]["forms"] >= 4
    assert json.loads(out.with_suffix(".json").read_text())["base"]
    assert uarch.load_table(out).lookup("vpmulld", ("ymm", "ymm", "ymm")).data_source.startswith("measured:")
    assert len(QUICK_FORMS) <= 6
