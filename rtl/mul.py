"""The multiply / dot-product path of the port: partitioned multipliers (stage M1), the combine
and dot-product adders (stage M2), and the result pipeline to the write port.

**M1** (:class:`Multipliers`): each word lane is a 16 x 16 multiplier built of four 9 x 9 signed
sub-multipliers (``ll``, ``lh + hl`` = ``mid``, ``hh``; each byte zero- or sign-extended to 9 bits
by the operation), so the same array does signed words and the unsigned x signed byte pairs of
``vpmaddubsw`` (cross terms masked). ``vpmulld`` takes the low 32 bits of ``A*B`` per dword as
``A0*B0 + ((A1*B0 + A0*B1) << 16)``: the even lane computes ``A0*B0`` unsigned, the odd lane
``A1*B0`` (its ``b`` word replaced by the even lane's) and one extra 16 x 16 low-half multiplier
per dword ``A0*B1``. The partial products are registered.

**M2** (:class:`DotCombine`): per word ``prod = (hh << 16) + (mid << 8) + ll``; ``vpmaddwd``'s
pair adders, ``vpmaddubsw``'s saturating word sums, ``vpmulld``'s combine; the result select.

**Pipeline** (:class:`ResultPipe`): the M2 result enters stage R1 and moves one stage a cycle; an
operation of latency ``L`` is written from stage ``R[L-2]`` (it executed M1 in its issue cycle,
so a dependent instruction issues ``L`` cycles later). The stages past M2 stand for the deeper
logic of a 5 GHz core's multiplier; their flip-flops are real and counted.
"""

from __future__ import annotations

from amaranth.hdl import Cat, Module, Mux, Signal, signed
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.rtl.alu import WORD_BITS
from tsar.rtl.ops import MAX_LATENCY, MUL_LATENCIES, MulFn
from tsar.rtl.regfile import reg_bits


class Multipliers(wiring.Component):
    """Stage M1: ``words`` partitioned 16 x 16 multipliers and ``words/2`` cross multipliers;
    outputs are registered (``ll``, ``mid``, ``hh`` per word, ``cross`` per dword, ``fn``).
    ``isolate``: input ``en`` AND-gates both operands (a multiplier operation is in the
    instruction register), so the array holds zeros while other operations run."""

    def __init__(self, words: int, isolate: bool = False):
        self.words = words
        self.isolate = isolate
        super().__init__({
            "a": In(WORD_BITS).array(words),
            "b": In(WORD_BITS).array(words),
            **({"en": In(1)} if isolate else {}),
            "fn": In(3),
            "ll": Out(signed(18)).array(words),
            "mid": Out(signed(19)).array(words),
            "hh": Out(signed(18)).array(words),
            "cross": Out(WORD_BITS).array(words // 2),
            "fn_q": Out(3),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        fn = self.fn
        word_signed = (fn == MulFn.MULLW) | (fn == MulFn.MULHW) | (fn == MulFn.MADDWD)
        bytes_ = fn == MulFn.MADDUBSW
        mulld = fn == MulFn.MULLD

        def ext(byte, signed_):
            return Mux(signed_, byte.as_signed(), byte.as_unsigned())

        a_in, b_in = list(self.a), list(self.b)
        if self.isolate:
            a_in = [x & self.en.replicate(WORD_BITS) for x in a_in]
            b_in = [x & self.en.replicate(WORD_BITS) for x in b_in]
        for w in range(self.words):
            a = a_in[w]
            b = b_in[w] if w % 2 == 0 else Mux(mulld, b_in[w - 1], b_in[w])
            a_l, a_h = ext(a[:8], 0), ext(a[8:], word_signed)
            b_l, b_h = ext(b[:8], bytes_), ext(b[8:], word_signed | bytes_)
            al, ah, bl, bh = (Signal(signed(9), name=f"{n}{w}") for n in ("al", "ah", "bl", "bh"))
            m.d.comb += [al.eq(a_l), ah.eq(a_h), bl.eq(b_l), bh.eq(b_h)]
            m.d.sync += [
                self.ll[w].eq(al * bl),
                self.hh[w].eq(ah * bh),
                self.mid[w].eq(Mux(bytes_, 0, al * bh + ah * bl)),
            ]
        for d in range(self.words // 2):
            m.d.sync += self.cross[d].eq((a_in[2 * d] * b_in[2 * d + 1])[:WORD_BITS])
        m.d.sync += self.fn_q.eq(fn)
        return m


class DotCombine(wiring.Component):
    """Stage M2 (combinational): products, dot-product pair sums, saturation, result select."""

    def __init__(self, words: int):
        self.words = words
        super().__init__({
            "ll": In(signed(18)).array(words),
            "mid": In(signed(19)).array(words),
            "hh": In(signed(18)).array(words),
            "cross": In(WORD_BITS).array(words // 2),
            "fn": In(3),
            "result": Out(words * WORD_BITS),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        n = self.words
        prod = [Signal(signed(34), name=f"prod{w}") for w in range(n)]
        m.d.comb += [prod[w].eq((self.hh[w] << 16) + (self.mid[w] << 8) + self.ll[w]) for w in range(n)]
        low = Cat(*(p[:16] for p in prod))
        high = Cat(*(p[16:32] for p in prod))
        pairs = [Signal(32, name=f"pair{d}") for d in range(n // 2)]
        m.d.comb += [pairs[d].eq(prod[2 * d][:32] + prod[2 * d + 1][:32]) for d in range(n // 2)]
        sat = []
        for w in range(n):
            s = Signal(signed(19), name=f"bsum{w}")
            m.d.comb += s.eq(self.ll[w] + self.hh[w])
            sat.append(Mux(s > 0x7FFF, 0x7FFF, Mux(s < -0x8000, 0x8000, s[:16]))[:16])
        mulld = [Cat(prod[2 * d][:16], prod[2 * d][16:32] + prod[2 * d + 1][:16] + self.cross[d])
                 for d in range(n // 2)]
        with m.Switch(self.fn):
            with m.Case(MulFn.MULLW):
                m.d.comb += self.result.eq(low)
            with m.Case(MulFn.MULHW):
                m.d.comb += self.result.eq(high)
            with m.Case(MulFn.MADDWD):
                m.d.comb += self.result.eq(Cat(*pairs))
            with m.Case(MulFn.MADDUBSW):
                m.d.comb += self.result.eq(Cat(*sat))
            with m.Case(MulFn.MULLD):
                m.d.comb += self.result.eq(Cat(*(x[:32] for x in mulld)))
        return m


STAGES = MAX_LATENCY - 2
"""Result stages R1 .. R[MAX_LATENCY - 2] after M2."""

TAPS = {lat: lat - 2 for lat in MUL_LATENCIES}
"""Latency -> the stage an operation of that latency is written from."""


class ResultPipe(wiring.Component):
    """Control of stage M1 (``issue``: a multiplier operation executes M1 this cycle) and the result
    stages R1 ..: data, destination, latency class, valid. ``wb_*``: the write this cycle;
    ``busy_dst`` / ``busy``: destinations of operations still in flight (for the hazard check)."""

    def __init__(self, bits: int):
        self.bits = bits
        self.lats = len(MUL_LATENCIES)
        self.regs = reg_bits(bits)
        super().__init__({
            "issue": In(1),
            "issue_dst": In(self.regs),
            "issue_lat": In(range(self.lats)),
            "m2_result": In(bits),
            "wb_en": Out(1),
            "wb_dst": Out(self.regs),
            "wb_data": Out(bits),
            "busy": Out(1 + STAGES),
            "busy_dst": Out(self.regs).array(1 + STAGES),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        valid = [Signal(name=f"v{k}") for k in range(STAGES + 1)]   # 0: M1 -> M2 register
        dst = [Signal(self.regs, name=f"dst{k}") for k in range(STAGES + 1)]
        lat = [Signal(range(self.lats), name=f"lat{k}") for k in range(STAGES + 1)]
        data = [None] + [Signal(self.bits, name=f"r{k}") for k in range(1, STAGES + 1)]
        m.d.sync += [valid[0].eq(self.issue), dst[0].eq(self.issue_dst), lat[0].eq(self.issue_lat)]
        writes = [Signal(name=f"w{k}") for k in range(STAGES + 1)]
        for k in range(STAGES + 1):
            taps = [i for i, latency in enumerate(MUL_LATENCIES) if TAPS[latency] == k]
            m.d.comb += writes[k].eq(valid[k] & Cat(*(lat[k] == i for i in taps)).any() if taps else 0)
        for k in range(1, STAGES + 1):
            m.d.sync += [valid[k].eq(valid[k - 1] & ~writes[k - 1]), dst[k].eq(dst[k - 1]),
                         lat[k].eq(lat[k - 1])]
            m.d.sync += data[k].eq(self.m2_result if k == 1 else data[k - 1])
        with m.Switch(Cat(*writes)):
            for k in range(1, STAGES + 1):
                with m.Case(1 << k):
                    m.d.comb += [self.wb_en.eq(1), self.wb_dst.eq(dst[k]), self.wb_data.eq(data[k])]
        m.d.comb += [self.busy.eq(Cat(*valid)), *(self.busy_dst[k].eq(dst[k]) for k in range(STAGES + 1))]
        return m
