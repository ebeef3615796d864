"""The weight-code decoder (rtl/weight_decoder.py): exhaustive Amaranth simulation against the ISA's
``code_indices`` for split and trit codes, a wrong decoder caught, and its synthesized cost (the
split code is wiring; a trit decoder is logic)."""

from __future__ import annotations

import pytest

from tsar.isa.config import TsarConfig
from tsar.rtl.cells import NAND2_AREA
from tsar.rtl.weight_decoder import WeightDecoder, check_decoder, decoders_per_slice, synthesize_decoder

TRITS = [TsarConfig(f"c{c}s{s}-trits", c=c, s=s, weight_code="trits")
         for c, s in ((1, 16), (2, 4), (3, 2), (4, 1))]
SPLIT = [TsarConfig("c2s4", c=2, s=4), TsarConfig("c3s2", c=3, s=2)]


@pytest.mark.parametrize("cfg", TRITS + SPLIT, ids=lambda cfg: cfg.name)
def test_every_code_decodes_as_the_isa_says(cfg):
    assert check_decoder(cfg) == 1 << cfg.code_bits


def test_a_wrong_decoder_is_caught(monkeypatch):
    cfg = TRITS[2]
    dense, sparse = cfg.code_table
    wrong = ((*dense[:13], dense[13] ^ 1, *dense[14:]), sparse)  # code 13 = three zero weights
    monkeypatch.setattr(WeightDecoder, "elaborate", _with_table(wrong))
    with pytest.raises(AssertionError, match="code 13"):
        check_decoder(cfg)


def _with_table(table):
    from amaranth.hdl import Module

    def elaborate(self, platform):
        m = Module()
        with m.Switch(self.code):
            for value, (d, s) in enumerate(zip(*table, strict=True)):
                with m.Case(value):
                    m.d.comb += [self.idx_d.eq(d), self.idx_s.eq(s)]
        return m
    return elaborate


def test_decoders_per_slice():
    c3s2 = TRITS[2]
    assert decoders_per_slice(c3s2) == c3s2.lanes == 16  # one per lane subtraction of a uop
    assert decoders_per_slice(c3s2, per_uop=False) == 32  # a whole 20-byte operand at once
    narrow = TsarConfig("c3s2-128", c=3, s=2, vector_bits=128, weight_code="trits")
    assert decoders_per_slice(narrow) == 8


@pytest.mark.slow  # (the first Yosys call compiles its WebAssembly: about 45 s on 2 cores)
def test_synthesized_cost():
    split = synthesize_decoder(SPLIT[1])
    assert (split.cells, split.area_um2) == (0, 0.0)  # idxD | idxS << c: wires only
    areas = [synthesize_decoder(cfg) for cfg in TRITS]
    assert all(a.cells > 0 and a.transistors > 0 for a in areas[1:])
    assert [a.area_um2 for a in areas] == sorted(a.area_um2 for a in areas)  # grows with c
    c3 = areas[2]
    assert c3.nand2 == pytest.approx(c3.area_um2 / NAND2_AREA)
    assert 20 < c3.nand2 < 200 and c3.depth > 0  # a 5-in, 6-out function: tens of gates
