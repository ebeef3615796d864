"""docs/extending.md ("Adding an ISA variant") says what the code does: its example configuration
registers, assembles, decodes and runs; every refusal it states happens, with an error naming the
parameter; its counts (dataflows, registers, derived sizes) are the code's; and every name it
mentions in backticks exists (a drift test that parses the page)."""

from __future__ import annotations

import ast
import importlib
import inspect
import io
import re
import tokenize
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stdout
from pathlib import Path

import numpy as np
import pytest

from tsar.isa import config
from tsar.isa.config import (
    C2S4,
    C2S4_128,
    TsarConfig,
    configs,
    register_config,
    registered,
    unregister_config,
)

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "extending.md"
TEXT = DOC.read_text()
PROSE = re.sub(r"```.*?```", "", TEXT, flags=re.S)
"""The page without its code blocks."""
TOKENS = sorted(set(re.findall(r"`([^`\n]+)`", PROSE)))
"""Everything the page's prose puts in backticks."""
FLAT = " ".join(TEXT.split())
"""The page with every run of white space as one blank (phrases independent of line breaks)."""
NUMBER_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7}


def _block(lang: str) -> str:
    blocks = re.findall(rf"```{lang}\n(.*?)```", TEXT, flags=re.S)
    assert len(blocks) == 1, f"docs/extending.md: expected one ```{lang} block, found {len(blocks)}"
    return blocks[0]


def _section(title: str) -> str:
    match = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", TEXT, flags=re.S | re.M)
    assert match, f"docs/extending.md has no section {title!r}"
    return match.group(1)


def _free_slot() -> int:
    taken = {cfg.slot for cfg in configs()}
    return next(s for s in range(16) if s not in taken)


@contextmanager
def variant(name: str, **fields: object) -> Iterator[TsarConfig]:
    """A configuration registered for the duration of the block (free slot, removed afterwards)."""
    cfg = register_config(TsarConfig(name, slot=_free_slot(), **fields))
    try:
        yield cfg
    finally:
        unregister_config(cfg.name)


@pytest.fixture(scope="module")
def c3s2() -> Iterator[TsarConfig]:
    """c3s2 defined exactly as the page's Python block does (on another slot only if 9 is taken)."""
    code = _block("python")
    assert 'TsarConfig("c3s2", c=3, s=2, vector_bits=256, slot=9)' in code
    if any(cfg.slot == 9 for cfg in configs()):
        code = code.replace("slot=9", f"slot={_free_slot()}")
    namespace: dict[str, object] = {}
    exec(compile(code, str(DOC), "exec"), namespace)
    cfg = namespace["c3s2"]
    assert isinstance(cfg, TsarConfig) and registered("c3s2") is cfg
    yield cfg
    unregister_config("c3s2")


# --- the register count ---------------------------------------------------------------------------
REGISTER_SCAN = ("sim/x86", "sim/host_oracle.py", "sim/native_engine", "sim/python_engine",
                 "sim/proxy_engine")
"""Where the simulator keeps vector register files; the count must come from isa/config.py."""
REGISTER_LITERALS = {
    "range(16)": re.compile(r"\brange\(\s*(?:0\s*,\s*)?16\s*\)"),
    "16 * REGISTER_BYTES": re.compile(r"\b16\s*\*\s*REGISTER_BYTES\b|\bREGISTER_BYTES\s*\*\s*16\b"),
    "(16, REGISTER_BYTES) shape": re.compile(r"\(\s*16\s*,\s*REGISTER_BYTES\s*\)"),
    "register number against 16": re.compile(r"\breg\w*\s*(?:>=|<=|<|>)\s*1[56]\b"),
    "register number & 15": re.compile(r"_reg\b[^\n]*?\)\s*&\s*15\b"),
    "a VECTOR_REGISTERS of its own": re.compile(r"^\s*VECTOR_REG\w*\s*(?::[^=]*)?=\s*\d"),
}


def _code_lines(path: Path) -> list[str]:
    """The file's lines with comments and docstrings blanked (strings that are code stay)."""
    text = path.read_text()
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr) and \
                isinstance(body[0].value, ast.Constant) and isinstance(body[0].value.value, str):
            for n in range(body[0].lineno - 1, body[0].end_lineno):
                lines[n] = ""
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.COMMENT:
            row, col = tok.start
            lines[row - 1] = lines[row - 1][:col]
    return lines


def test_vector_register_count_comes_from_isa_config() -> None:
    assert "`tsar.isa.config.VECTOR_REGISTERS` (16, what VEX addresses)" in FLAT
    assert config.VECTOR_REGISTERS == 16
    from tsar.kernels import tsar_plan
    from tsar.rtl.regfile import RegisterFile
    from tsar.sim.x86.state import CpuState

    for cfg in config.configs():
        expected = config.EVEX_VECTOR_REGISTERS if cfg.encoding == "evex" else config.VECTOR_REGISTERS
        assert cfg.addressable_registers == expected
        assert tsar_plan.make_plan(cfg, "op", cfg.m, cfg.k).registers == expected
    assert len(RegisterFile(256).regs) == config.VECTOR_REGISTERS
    assert CpuState.__init__.__code__.co_names.count("EVEX_VECTOR_REGISTERS")  # sized from the ISA
    assert "`tsar.isa.config.EVEX_VECTOR_REGISTERS` (32, what EVEX addresses)" in FLAT
    assert config.EVEX_VECTOR_REGISTERS == 32 and config.MAX_VECTOR_BYTES == 64
    found = []
    for where in REGISTER_SCAN:
        root = REPO / where
        for path in sorted(root.rglob("*.py") if root.is_dir() else [root]):
            for n, line in enumerate(_code_lines(path), 1):
                found += [f"{path.relative_to(REPO)}:{n}: {what}: {line.strip()}"
                          for what, pattern in REGISTER_LITERALS.items() if pattern.search(line)]
    assert not found, ("the vector register count restated instead of tsar.isa.config.VECTOR_REGISTERS:\n"
                       + "\n".join(found))


# --- a new (c, s, width) point --------------------------------------------------------------------
def test_python_block_defines_c3s2_with_the_stated_shape(c3s2: TsarConfig) -> None:
    from tsar.isa.instructions import TGEMV_OPCODE_BASE, TLUT_OPCODE_BASE, VEX_MAP, by_mnemonic

    assert (TLUT_OPCODE_BASE, TGEMV_OPCODE_BASE, VEX_MAP) == (0x20, 0x30, 8)
    assert "(TLUT `0x20|slot`, TGEMV `0x30|slot`, VEX map 8" in FLAT
    (tlut,) = by_mnemonic(c3s2.tlut_mnemonic)
    (tgemv,) = by_mnemonic(c3s2.tgemv_mnemonic)
    assert (tlut.opcode, tgemv.opcode, tlut.vex_l) == (0x20 | c3s2.slot, 0x30 | c3s2.slot, 1)
    stated = [
        f"k = {c3s2.k} activations per instruction", f"2^{c3s2.c} = {c3s2.patterns} patterns per table",
        f"{c3s2.group_words}-word LUT group in {c3s2.group_regs} ymm registers (base aligned to "
        f"{c3s2.group_regs})", f"{c3s2.code_bits}-bit weight codes (`idxD | idxS << {c3s2.c}`",
        f"{c3s2.weight_bytes}-byte weight operands", f"m = {c3s2.m} outputs",
        f"{c3s2.tlut_uops} TLUT and {c3s2.tgemv_uops} TGEMV uops",
        f"widened every {c3s2.max_tgemv_per_widen()} TGEMVs"]
    for phrase in stated:
        assert " ".join(phrase.split()) in FLAT, phrase
    assert 8 % c3s2.code_bits  # "straddling bytes"
    assert c3s2.make_code(0b101, 0b001) == 0b101 | 0b001 << 3


def test_toml_block_declares_the_same_point() -> None:
    from tsar.isa.isafile import parse_isa_text

    (cfg,) = parse_isa_text(_block("toml"), "extending.md")
    want = TsarConfig("c3s2", c=3, s=2, vector_bits=256, slot=cfg.slot)
    assert cfg == want  # the variant axes default to the paper's choices
    known = registered("c3s2")
    assert cfg.slot == (known.slot if known else _free_slot())  # the lowest free slot


def test_tsar_isa_file_on_the_command_line(c3s2: TsarConfig, tmp_path: Path) -> None:
    from tsar.cli.main import main

    (tmp_path / "c3s2.toml").write_text(_block("toml"))
    (tmp_path / "k.s").write_text("tlut3x2 ymm4, [rsi]\ntgemv6x16 ymm0, ymm4, [rdx]\nret\n")
    out = io.StringIO()
    with redirect_stdout(out):
        assert main(["--isa", str(tmp_path / "c3s2.toml"), "asm", str(tmp_path / "k.s")]) == 0
        assert main(["isa"]) == 0
    assert "2 T-SAR instruction(s)" in out.getvalue()
    assert c3s2.tlut_mnemonic in out.getvalue() and c3s2.tgemv_mnemonic in out.getvalue()
    assert registered("c3s2") is c3s2  # the file declared the registered point: nothing new


def test_the_encoding_refuses_what_it_cannot_hold() -> None:
    refused = {
        "c=5": dict(c=5, s=2), "vector_bits=1024": dict(c=2, s=4, vector_bits=1024),
        "slot 16": dict(c=2, s=4, slot=16), "does not fill": dict(c=1, s=1),
        "does not tile": dict(c=4, s=3), "320 bits is not whole": dict(c=3, s=4, weight_code="trits"),
        "acc_bits=24; supported: (16, 32)": dict(c=2, s=4, acc_bits=24),
        "lut_layout='half'": dict(c=2, s=4, lut_layout="half"),
        "weight_code='bits'": dict(c=2, s=4, weight_code="bits"),
        "lut_bits=8": dict(c=2, s=4, lut_bits=8),
    }
    for message, fields in refused.items():
        with pytest.raises(ValueError, match=re.escape(message)):
            TsarConfig("x", **fields)
    assert "`acc_bits=24; supported: (16, 32)`" in FLAT


def test_register_config_refuses_name_slot_and_mnemonic(c3s2: TsarConfig) -> None:
    with pytest.raises(ValueError, match="'c3s2' is already registered"):
        register_config(TsarConfig("c3s2", c=1, s=4, slot=_free_slot()))
    with pytest.raises(ValueError, match=f"slot {c3s2.slot} is taken by c3s2"):
        register_config(TsarConfig("c1s4", c=1, s=4, slot=c3s2.slot))
    c4s2 = TsarConfig("c4s2", c=4, s=2, slot=_free_slot())
    assert c4s2.tgemv_mnemonic == C2S4.tgemv_mnemonic == "tgemv8x16"
    with pytest.raises(ValueError, match="tgemv8x16 already exists at this width"):
        register_config(c4s2)
    assert registered("c4s2") is None and registered("c1s4") is None


def test_assembler_and_decoders_take_the_stated_instructions(c3s2: TsarConfig) -> None:
    from tsar.isa import assemble, decode, decode_stream, disassemble, format_lines
    from tsar.isa.instructions import MEMORY_SIZE_NAMES

    examples = [t for t in TOKENS if t.split(" ")[0] in (c3s2.tlut_mnemonic, c3s2.tgemv_mnemonic)]
    assert len(examples) == 3
    for line in examples:
        code = assemble(line).code
        assert str(decode(code)) == line
        (decoded,) = decode_stream(code)
        assert decoded.is_tsar and str(decoded.tsar) == line
        assert line in format_lines(disassemble(code))
    assert c3s2.k not in MEMORY_SIZE_NAMES and c3s2.weight_bytes not in MEMORY_SIZE_NAMES  # no "... ptr"
    assert "none exists for 6 or 24 bytes" in FLAT and (c3s2.k, c3s2.weight_bytes) == (6, 24)


def test_golden_semantics_run_c3s2(c3s2: TsarConfig) -> None:
    from tsar.isa.semantics import pack_tile, tgemv, tile_matvec, tlut

    rng = np.random.default_rng(1)
    tiles = rng.integers(-1, 2, (64, c3s2.m, c3s2.k)).astype(np.int8)
    act = rng.integers(-127, 128, (64, c3s2.k)).astype(np.int8)
    acc = tgemv(c3s2, np.zeros((64, c3s2.m), np.int16), tlut(c3s2, act), pack_tile(c3s2, tiles))
    assert (acc == tile_matvec(c3s2, tiles, act)).all()


def _run(kernel: str, machine: object = None, M: int = 32, K: int = 96) -> object:
    from tsar.simulate.tsar_kernel import plan_for, simulate

    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, K)).astype(np.float32)
    w = rng.integers(-1, 2, (M, K)).astype(np.int8)
    options = {"machine": machine, "memory_stats": False} if machine is not None else {}
    return simulate(plan_for(kernel, M, K), x, w, 0.5, **options)


def test_the_stated_dataflows_are_the_generators(c3s2: TsarConfig) -> None:
    from tsar.kernels.tsar_plan import FLOWS, kernel_name, kernel_names

    match = re.search(r"builds the (\w+) BitLinear dataflows of `tsar\.kernels\.tsar_plan\.FLOWS`", FLAT)
    assert match and NUMBER_WORDS[match.group(1)] == len(FLOWS)
    stated = [t for t in TOKENS if t.startswith("tsar-c3s2-")]
    assert sorted(stated) == sorted(kernel_name(c3s2, flow) for flow in FLOWS)
    assert set(stated) <= set(kernel_names())
    for kernel in stated:  # K = 104 is not a multiple of k = 6: zero-padded to whole chunks
        assert _run(kernel, K=104).exact, kernel


@pytest.mark.native
def test_native_engine_runs_c3s2(c3s2: TsarConfig) -> None:
    from tsar.sim import create_machine

    assert (REPO / "sim/native_engine/tsar_stubs.py").is_file()
    assert _run("tsar-c3s2-op", create_machine("native")).exact


def test_rtl_schedules_of_c3s2(c3s2: TsarConfig) -> None:
    from tsar.rtl import ScheduleError, SimdSlice, check_schedules
    from tsar.rtl.schedule import LANE_CHAIN, tree_segments

    assert NUMBER_WORDS["two"] == LANE_CHAIN and "`tsar.rtl.schedule.LANE_CHAIN` (two)" in FLAT
    with pytest.raises(ScheduleError, match=r"D0\[0\] chains 3 lane operations"):
        check_schedules(c3s2, samples=200)
    assert "`D0[0] = -(a0+a1+a2)`" in TEXT
    assert c3s2.word_index(0, "D", 0) == 0  # D0[0]: no activation bit set, minus all three
    check_schedules(c3s2, samples=200, lane_chain=3)
    assert tree_segments(c3s2) == 2 and config.ADDER_TREE_FAN_IN == 4
    with pytest.raises(ValueError, match=r"s=2 < adder-tree fan-in 4 needs split adder trees"):
        SimdSlice(256, tsar=(c3s2,))


def test_timing_model_uses_rtl_cycles_else_uop_counts(c3s2: TsarConfig) -> None:
    from tsar.isa.measured_cycles import has_rtl_timing, rtl_timing
    from tsar.sim.timing.predict import predict
    from tsar.sim.uarch.tsar_ops import issue_cycles
    from tsar.simulate.tsar_kernel import plan_for, program_for

    assert not has_rtl_timing(c3s2)
    assert (issue_cycles(c3s2, "tlut"), issue_cycles(c3s2, "tgemv")) == (c3s2.tlut_uops, c3s2.tgemv_uops)
    assert has_rtl_timing(C2S4)
    assert issue_cycles(C2S4, "tgemv") == round(rtl_timing(C2S4.name, C2S4.tgemv_mnemonic)[1])
    run = _run("tsar-c3s2-op")
    p = predict(run.stats, program_for(plan_for("tsar-c3s2-op", 32, 96)).code, run.code_address, "laptop")
    assert p.cycles > 0


def test_c_header_covers_c3s2(c3s2: TsarConfig) -> None:
    """tsar.h defines c3s2's macros, with bare addresses for its 6- and 24-byte operands."""
    from tsar.isa.cheader import header_text
    from tsar.isa.instructions import MEMORY_SIZE_NAMES

    text = header_text()
    assert "#define TSAR_TLUT3X2(" in text and "#define TSAR_TGEMV6X16(" in text
    assert f"{c3s2.tlut_mnemonic} {{lut0..lut" in text and "[act_ptr]" in text
    assert c3s2.k not in MEMORY_SIZE_NAMES and c3s2.weight_bytes not in MEMORY_SIZE_NAMES
    assert "gains `TSAR_TLUT3X2` and `TSAR_TGEMV6X16`; their 6- and 24-byte memory operands" in FLAT


# --- what refuses what ----------------------------------------------------------------------------
def _refusals_table() -> str:
    return _section("What refuses what")


def test_rtl_schedules_refuse_with_the_parameter() -> None:
    from tsar.rtl import ScheduleError, SimdSlice, check_schedules, tgemv_schedule

    c1s8 = TsarConfig("doc-c1s8", c=1, s=8)  # tgemv8x16, c2s4's mnemonic: the RTL takes it unregistered
    with pytest.raises(ScheduleError, match=r"s=8 blocks onto 4:1 adder trees; s must divide 4"):
        check_schedules(c1s8, samples=50)
    for entry in (tgemv_schedule, lambda cfg: SimdSlice(256, tsar=(cfg,))):
        with pytest.raises(ScheduleError, match=r"s=8"):
            entry(c1s8)
    with variant("doc-compact-i32", c=2, s=4, lut_layout="compact", acc_bits=32) as cfg:
        message = r"lut_layout='compact' with acc_bits=32 needs 18-bit lane results .* the lanes give 17"
        with pytest.raises(ScheduleError, match=message):
            check_schedules(cfg, samples=50)
        for entry in (tgemv_schedule, lambda cfg: SimdSlice(256, tsar=(cfg,))):
            with pytest.raises(ScheduleError, match=message):
                entry(cfg)
    assert "18-bit lane results, the lanes give 17" in " ".join(_refusals_table().split())


def test_rtl_slice_refuses_with_the_parameter(monkeypatch: pytest.MonkeyPatch) -> None:
    from tsar.rtl import SimdSlice

    with variant("doc-c2s4-trits", c=2, s=4, weight_code="trits") as cfg, \
            pytest.raises(ValueError, match=r"weight_code='trits' is not supported by the slice"):
        SimdSlice(256, tsar=(cfg,))
    with pytest.raises(ValueError, match=r"c2s4-128 is a 128-bit configuration"):
        SimdSlice(256, tsar=(C2S4_128,))
    monkeypatch.setattr(config, "LUT_BITS", (8, 16))  # a new axis value the RTL lacks
    with pytest.raises(ValueError, match=r"lut_bits=8 is not supported by the RTL"):
        SimdSlice(256, tsar=(TsarConfig("doc-lut8", c=2, s=4, lut_bits=8),))
    table = _refusals_table()
    for fragment in ("`weight_code=`", "`s=`", "`lut_bits=`", "`lut_layout=... with acc_bits=...`"):
        assert fragment in table


def test_golden_semantics_refuse_other_lut_widths(monkeypatch: pytest.MonkeyPatch) -> None:
    from tsar.isa.semantics import tgemv, tlut

    monkeypatch.setattr(config, "LUT_BITS", (8, 16))
    cfg = TsarConfig("doc-lut8", c=2, s=4, lut_bits=8)
    with pytest.raises(ValueError, match=r"lut_bits=8"):
        tlut(cfg, np.zeros(cfg.k, np.int8))
    with pytest.raises(ValueError, match=r"lut_bits=8"):
        tgemv(cfg, np.zeros(cfg.m, np.int16), np.zeros(cfg.group_words, np.int16),
              np.zeros(cfg.weight_bytes, np.uint8))


def test_kernel_generator_refuses_128_bit_int32() -> None:
    from tsar.common.errors import UserError
    from tsar.kernels.tsar_plan import FLOWS, kernel_names, make_plan
    from tsar.rtl import SimdSlice
    from tsar.simulate.tsar_kernel import plan_for

    with variant("doc-c2s4-128-i32", c=2, s=4, vector_bits=128, acc_bits=32) as cfg:
        assert cfg.m == cfg.vector_bits // cfg.acc_bits == 4
        with pytest.raises(UserError, match=r"m=4 outputs per TGEMV"):
            plan_for(f"tsar-{cfg.name}-op", 16, 48)
        for flow in FLOWS:
            with pytest.raises(ValueError, match=r"m=4 outputs per TGEMV"):
                make_plan(cfg, flow, 16, 48)
        assert not any(cfg.name in k for k in kernel_names())
        SimdSlice(128, tsar=(cfg,))  # the RTL builds it
    assert "`m=4 outputs per TGEMV`" in _refusals_table()
    # the other axis values give m = 8 or 16: no other configuration is refused
    for bits in (128, 256):
        for acc in config.ACC_BITS:
            whole = TsarConfig("x", c=2, s=4, vector_bits=bits, acc_bits=acc).m % 8 == 0
            assert whole == ((bits, acc) != (128, 32))


def test_what_builds_builds() -> None:
    from tsar.isa.measured_cycles import has_rtl_timing
    from tsar.kernels.tsar_codegen import generate
    from tsar.kernels.tsar_plan import FLOWS, kernel_names, make_plan
    from tsar.rtl import SimdSlice

    SimdSlice(128, tsar=(C2S4_128,))
    assert has_rtl_timing(C2S4_128)
    i32 = TsarConfig("c2s4-i32", c=2, s=4, acc_bits=32, slot=_free_slot())
    ours = registered("c2s4-i32") is None
    i32 = config.ensure_registered(i32) if ours else registered("c2s4-i32")
    try:
        SimdSlice(256, tsar=(i32,))
        assert has_rtl_timing(i32)  # measured as a variant of this name and definition
    finally:
        if ours:
            unregister_config("c2s4-i32")
    assert {f"tsar-c2s4-128-{flow}" for flow in FLOWS} <= set(kernel_names())
    assert "c2s4-128" in (REPO / "docs" / "dse.md").read_text()
    for flow in FLOWS:
        generate(make_plan(C2S4_128, flow, 32, 64))
    axes = ({"lut_layout": "compact"}, {"weight_code": "trits"}, {"acc_bits": 32})
    for n, fields in enumerate(axes):  # the generator takes the configuration itself: no registration
        shape = {"c": 3, "s": 2} if "weight_code" in fields else {"c": 2, "s": 4}
        cfg = TsarConfig(f"doc-axis-{n}", **shape, **fields)
        assert cfg.vector_bits == 256
        for flow in FLOWS:
            assert "tgemv" in generate(make_plan(cfg, flow, cfg.m * 2, 48))


# --- a new value of a variant axis ----------------------------------------------------------------
def test_variant_axes_are_the_declared_ones() -> None:
    section = " ".join(_section("A new value of a variant axis").split())
    assert set(config.LUT_LAYOUTS) == {"full", "compact"} and config.LUT_LAYOUTS["full"] == ("D", "S")
    assert config.LUT_LAYOUTS["compact"] == ("S",)
    assert set(config.WEIGHT_CODES) == {"split", "trits"}
    assert (config.LUT_BITS, config.ACC_BITS) == ((16,), (16, 32))
    assert "`lut_bits` (16), `acc_bits` (16 or 32;" in section
    for value in (*config.LUT_LAYOUTS, *config.WEIGHT_CODES):
        assert f'"{value}"' in section
    tags = {tag: value for (_, value), tag in config.VARIANT_TAGS.items()}
    assert tags == {"c": "compact", "d": 32, "t": "trits"}
    assert "(`c` compact, `d` int32 accumulators, `t` trits)" in section
    for name in ("full", "compact"):
        assert config.TGEMV_TERMS[name]
    trits = TsarConfig("x", c=3, s=2, weight_code="trits")
    dense, sparse = trits.code_table
    assert trits.code_bits == 5 and trits.code_indices(26) == (dense[26], sparse[26])


def test_method_table_names_configuration_members() -> None:
    rows = [line for line in _section("A new value of a variant axis").splitlines()
            if line.startswith("|") and not line.startswith("|---")]
    assert rows[0].split("|")[2].strip() == "method / property"
    cfg = TsarConfig("x", c=2, s=4)
    for row in rows[1:]:
        for token in re.findall(r"`([^`]+)`", row.split("|")[2]):
            if token.startswith("tsar."):
                _resolve(token)
                continue
            name = token.split("(")[0]
            assert hasattr(cfg, name), f"TsarConfig has no {name!r} (docs/extending.md table)"
            member = getattr(TsarConfig, name, None)
            if token.endswith(")"):  # written as a call: a method taking as many arguments
                params = list(inspect.signature(member).parameters)[1:]
                args = [a for a in token[len(name) + 1:-1].split(",") if a.strip()]
                assert len(args) <= len(params), token


# --- every name in backticks exists ---------------------------------------------------------------
def _resolve(dotted: str) -> object:
    """The object a dotted ``tsar.`` name names (the module prefix imported, then attributes)."""
    dotted = re.sub(r"\(.*\)$", "", dotted)
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:n]))
        except ModuleNotFoundError:
            continue
        for attr in parts[n:]:
            assert hasattr(obj, attr), f"{dotted}: {'.'.join(parts[:n])} has no {attr!r}"
            obj = getattr(obj, attr)
        return obj
    raise AssertionError(f"{dotted}: no such module")


def _namespaces() -> list[object]:
    from tsar.kernels import tsar_plan
    from tsar.rtl import schedule

    return [TsarConfig("x", c=2, s=4), config, tsar_plan, schedule]


def _check_special(token: str, cfg: TsarConfig) -> bool:
    """Tokens that are neither names nor paths, each checked against the code."""
    from tsar.isa.instructions import MEMORY_SIZE_NAMES, InstructionSpec

    checks: dict[str, Callable[[], bool]] = {
        "0x20|slot": lambda: _resolve("tsar.isa.instructions.TLUT_OPCODE_BASE") == 0x20,
        "0x30|slot": lambda: _resolve("tsar.isa.instructions.TGEMV_OPCODE_BASE") == 0x30,
        "VEX.L": lambda: hasattr(InstructionSpec, "vex_l"),
        "... ptr": lambda: "qword" in MEMORY_SIZE_NAMES.values() and not {6, 24} & set(MEMORY_SIZE_NAMES),
        "idxD | idxS << c": lambda: C2S4.make_code(3, 1) == 3 | 1 << C2S4.c,
        "idxD | idxS << 3": lambda: cfg.make_code(5, 1) == 5 | 1 << 3,
        "(idxD, idxS)": lambda: C2S4.code_indices(0b0111) == (3, 1),
        "D0[0] = -(a0+a1+a2)": lambda: cfg.word_meaning(0) == (0, "D", 0),
        "tsar.h": lambda: (REPO / "kernels" / "c" / "tsar.h").is_file(),
        "TSAR_TLUT3X2": lambda: "#define TSAR_TLUT3X2(" in _resolve("tsar.isa.cheader.header_text")(),
        "TSAR_TGEMV6X16": lambda: "#define TSAR_TGEMV6X16(" in _resolve("tsar.isa.cheader.header_text")(),
        "[act_ptr]": lambda: "[act_ptr]" in _resolve("tsar.isa.cheader.header_text")(),
        "L'L = 10": lambda: _resolve("tsar.isa.instructions.EVEX_LENGTH_512") == 0b10,
        "vector_bits = 512": lambda: _resolve("tsar.isa.config.VECTOR_WIDTHS")[512][1] == "evex",
        "acc_bits=24; supported: (16, 32)": lambda: config.ACC_BITS == (16, 32),  # message: above
        "m=4 outputs per TGEMV": lambda: True,  # test_kernel_generator_refuses_128_bit_int32
        "lut_layout=... with acc_bits=...": lambda: True,  # test_rtl_schedules_refuse_with_the_parameter
    }
    check = checks.get(token)
    return check is not None and check()


def test_every_backticked_name_exists(c3s2: TsarConfig) -> None:
    from tsar.cli.main import command_modules
    from tsar.isa.instructions import mnemonics
    from tsar.kernels.tsar_plan import kernel_names
    from tsar.rtl.schedule import check_schedules

    commands = {importlib.import_module(f"tsar.cli.commands.{m}").NAME for m in command_modules()}
    fields = {f for f in TsarConfig.__dataclass_fields__}
    unknown = []
    for token in TOKENS:
        if token.startswith("tsar.") and " " not in token and token != "tsar.h":
            _resolve(token)
        elif re.fullmatch(r"[\w./-]+\.(py|md|toml|json)", token):
            assert (REPO / token).is_file(), f"{token}: no such file"
        elif token.startswith("tsar ") or token.startswith("tsar --isa"):
            words = token.split()
            command = words[3] if words[1] == "--isa" else words[1]
            assert command in commands or command == "<command>", token
        elif token.startswith("tsar-"):
            assert token in kernel_names(), token
        elif token.split(" ")[0] in mnemonics() and " " in token:
            _resolve("tsar.isa.assemble")(token)
        elif token in mnemonics():
            pass
        elif re.fullmatch(r"\w+=", token):
            assert token[:-1] in fields, token
        elif re.fullmatch(r"\w+=[\w\"]+", token):
            key, value = token.split("=")
            value = ast.literal_eval(value)
            if key in fields:
                TsarConfig("x", **{"c": 2, "s": 4, key: value})
            else:
                assert key in inspect.signature(check_schedules).parameters, token
        elif token in {tag for tag in config.VARIANT_TAGS.values()} and not hasattr(TsarConfig, token):
            pass
        elif re.fullmatch(r"[A-Za-z_]\w*(\(.*\))?", token):
            name = token.split("(")[0]
            assert any(hasattr(ns, name) for ns in _namespaces()) or _check_special(token, c3s2), \
                f"{token}: not a name of the code"
        elif not _check_special(token, c3s2):
            unknown.append(token)
    assert not unknown, f"docs/extending.md: backticked tokens this test does not check: {unknown}"
