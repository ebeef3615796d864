"""ISA variants as data: the compact LUT, int32 accumulators, trit weight codes and the 128-bit
configuration through the golden semantics (against the plain ternary product), the generated
kernels in both engines (against the numpy reference), and ``--isa FILE`` TOML declarations with
one-line errors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tsar.isa import assemble, decode, pack_tile, tgemv, tlut
from tsar.isa.config import configs, get_config, unregister_config
from tsar.isa.isafile import IsaFileError, load_isa_file, parse_isa_text
from tsar.isa.semantics import tile_matvec

VARIANTS_TOML = Path(__file__).resolve().parents[2] / "docs" / "dse" / "variants.toml"


@pytest.fixture(scope="module")
def variants():
    before = {cfg.name for cfg in configs()}
    cfgs = load_isa_file(VARIANTS_TOML)
    yield {cfg.name: cfg for cfg in cfgs}
    for cfg in cfgs:
        if cfg.name not in before:
            unregister_config(cfg.name)


def test_shipped_variants_and_their_derived_shapes(variants):
    i32, compact, compact4 = variants["c2s4-i32"], variants["c2s4-compact"], variants["c4s4-compact"]
    assert (i32.m, i32.acc_dtype, i32.weight_bytes, i32.tgemv_uops, i32.needs_widening) == (8, "int32", 16, 2,
                                                                                          False)
    assert (compact.group_regs, compact.tlut_uops, compact.tgemv_uops) == (1, 1, 4)
    assert (compact4.group_regs, compact4.tlut_uops) == (4, 4)
    assert compact.tgemv_terms() == (("S", "idxD", 2), ("S", "all", -1), ("S", "idxS", -1))
    assert load_isa_file(VARIANTS_TOML)[0] is get_config("c2s4-i32")  # loading twice is a no-op
    trits = variants["c3s2-trits"]
    assert (trits.code_bits, trits.weight_bytes, trits.weight_regs, trits.group_regs) == (5, 20, 1, 2)
    assert trits.bits_per_weight == pytest.approx(5 / 3)
    assert (trits.tlut_mnemonic, trits.tgemv_mnemonic) == ("tlut3x2t", "tgemv6x16t")


@pytest.mark.parametrize("name", ["c2s4-i32", "c2s4-compact", "c4s4-compact", "c2s4-128", "c3s2-trits"])
def test_semantics_equal_the_ternary_product(variants, name):
    cfg = get_config(name)
    rng = np.random.default_rng(cfg.slot)
    tiles = rng.integers(-1, 2, (300, cfg.m, cfg.k)).astype(np.int8)
    act = rng.integers(-127, 128, (300, cfg.k)).astype(np.int8)
    start = rng.integers(-30000, 30000, (300, cfg.m)).astype(cfg.acc_dtype)
    got = tgemv(cfg, start, tlut(cfg, act), pack_tile(cfg, tiles))
    want = (start.astype(np.int64) + tile_matvec(cfg, tiles, act)).astype(cfg.acc_dtype)
    assert got.dtype == np.dtype(cfg.acc_dtype) and np.array_equal(got, want)


def test_compact_lut_holds_only_s(variants):
    cfg = variants["c2s4-compact"]
    act = np.arange(1, 9, dtype=np.int8)
    words = tlut(cfg, act)  # block b: S_b[p] = sum of the activations whose bit is set in p
    assert words.tolist()[:4] == [0, 1, 2, 3] and words.tolist()[4:8] == [0, 3, 4, 7]


def test_assembler_round_trip(variants):
    program = assemble("tlut2x4c ymm3, qword ptr [rsi]\ntgemv8x8d ymm0, ymm14, xmmword ptr [rdx]\n")
    first = decode(program.code)
    second = decode(program.code, first.length)
    assert str(first).startswith("tlut2x4c ymm3") and second.mnemonic == "tgemv8x8d"


@pytest.mark.parametrize("name", ["c2s4-i32", "c2s4-compact", "c4s4-compact", "c2s4-128", "c3s2-trits"])
@pytest.mark.parametrize("flow", ["op", "ap-min", "ap-max", "op-tokens", "ap-tokens"])
def test_generated_kernels_bit_exact(variants, name, flow):
    """Both engines against the numpy reference: several OP passes (13 tiles of 16 / 26 of 8),
    K crossing the int16 widening windows (1032 = 172 chunks of 6 where k does not divide 1024),
    and the adversarial all-+1 case at the int8 extremes."""
    from tsar.sim import create_machine
    from tsar.simulate.tsar_kernel import plan_for, simulate

    rng = np.random.default_rng(7)
    M, K = 208, (1024 if 1024 % get_config(name).k == 0 else 1032)
    plan = plan_for(f"tsar-{name}-{flow}", M, K)
    x = rng.standard_normal((3, K)).astype(np.float32)
    w = rng.integers(-1, 2, (M, K)).astype(np.int8)
    x_max = np.where(rng.random((2, K)) < 0.5, 1.0, -1.0).astype(np.float32)
    x_max[0] = 1.0
    for xs, ws in ((x, w), (x_max, np.ones((M, K), np.int8))):
        assert simulate(plan, xs, ws, 0.5).exact
        assert simulate(plan, xs, ws, 0.5, machine=create_machine("native"), memory_stats=False).exact


@pytest.mark.parametrize(("text", "message"), [
    ('[[config]]\nname = "v"\nc = 2\ns = 4\nacc_bits = 24\n', r"^x\.toml:5: v: acc_bits=24"),
    ('[[config]]\nname = "v"\nc = 2\ns = 4\nfoo = 1\n', r"^x\.toml:5: unknown key 'foo'"),
    ('[[config]]\nname = "v"\nc = 2\ns =\n', r"^x\.toml:4: "),
    ('[[config]]\nname = "v"\nc = "2"\ns = 4\n', r"^x\.toml:3: c = '2': expected an integer"),
    ('[[config]]\nname = "v"\ns = 4\n', r"^x\.toml:1: \[\[config\]\] #1 lacks 'c'"),
    ('name = "v"\n', r"^x\.toml: unknown top-level key 'name'"),
    ('# nothing\n', r"^x\.toml: no \[\[config\]\] table"),
    ('[[config]]\nname = "v"\nc = 2\ns = 4\n\n[[config]]\nname = "v"\nc = 4\ns = 4\n',
     r"^x\.toml:6: configuration 'v' declared twice"),
    ('[[config]]\nname = "v"\nc = 2\ns = 4\nlut_layout = "sparse"\n', r"^x\.toml:5: .*lut_layout"),
])
def test_bad_files_are_one_line_errors(text, message):
    with pytest.raises(IsaFileError, match=message) as info:
        parse_isa_text(text, "x.toml")
    assert "\n" not in str(info.value)


def test_free_slots_are_assigned():
    cfgs = parse_isa_text('[[config]]\nname = "a"\nc = 2\ns = 4\nacc_bits = 32\n'
                          '[[config]]\nname = "b"\nc = 2\ns = 4\nlut_layout = "compact"\n')
    taken = {cfg.slot for cfg in configs()}
    assert cfgs[0].slot not in taken and cfgs[1].slot not in taken and cfgs[0].slot < cfgs[1].slot


def test_cli_isa_option(tmp_path, capsys):
    from tsar.cli.main import main

    bad = tmp_path / "bad.toml"
    bad.write_text('[[config]]\nname = "v"\nc = 9\ns = 4\n')
    assert main(["--isa", str(bad), "isa"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:3:" in err and "c=9" in err
