"""The SIMD integer ALU of the port: one 256-bit segmented adder with element sizes of 8, 16, 32
and 64 bits, wrapping and saturating add/subtract, compare, min/max and logic.

The adder is built of byte adders whose carries are cut at element boundaries; the flags of an
element (carry, signed overflow, sign, equality) come from its top byte and are broadcast to its
bytes, which then pick the result: the sum, a saturation constant, a compare mask, ``a`` or ``b``
(min/max) or a logic function.

The operands are ports of :data:`WORD_BITS`-bit words so that operand MUXes (T-SAR) can drive each
word, and ``sub`` (invert ``b``, carry in 1) is per word so that each word can add or subtract on
its own (``fn = ADD``, ``esize = w``).
"""

from __future__ import annotations

from amaranth.hdl import Cat, Const, Module, Mux, Signal
from amaranth.lib import wiring
from amaranth.lib.wiring import In, Out

from tsar.rtl.ops import AluFn

WORD_BITS = 16
"""Width of one word lane (the operand-port granule, and the T-SAR LUT word)."""

WIDE_BITS = 2 * WORD_BITS
"""Width of the dot-product adders (a word lane's product)."""

ESIZES = 4
"""Element sizes 1, 2, 4, 8 bytes (code = log2 bytes)."""


class SimdAlu(wiring.Component):
    """``words`` x :data:`WORD_BITS`-bit ALU (combinational; ``esize`` element size code, ``fn``
    an :class:`~tsar.rtl.ops.AluFn`). ``sub[w]``: word ``w``'s adder computes ``a - b``.

    Each word adds locally (``word_sum``, carry-in only where an element starts); 32- and 64-bit
    elements add the carry from the word below by an increment. ``word_sum`` depends on its own
    word's operands only, so T-SAR's lane-to-lane forwarding takes it without a combinational
    path through the other words' carries and flags."""

    def __init__(self, words: int):
        self.words = words
        super().__init__({
            "a": In(WORD_BITS).array(words),
            "b": In(WORD_BITS).array(words),
            "sub": In(words),
            "fn": In(4),
            "esize": In(2),
            "result": Out(WORD_BITS).array(words),
            "word_sum": Out(WORD_BITS).array(words),
        })

    def elaborate(self, platform) -> Module:
        m = Module()
        nbytes = self.words * WORD_BITS // 8
        a_all, b_all = Cat(*self.a), Cat(*self.b)
        A = [a_all.word_select(i, 8) for i in range(nbytes)]
        B = [b_all.word_select(i, 8) for i in range(nbytes)]
        per_word = WORD_BITS // 8
        assert per_word == 2
        sums, cout, ovf, eqb = [], [], [], []
        carry = None
        for w in range(self.words):
            inv = self.sub[w]
            bx = [Signal(8, name=f"bx{2 * w + k}") for k in range(2)]
            m.d.comb += [bx[k].eq(B[2 * w + k] ^ inv.replicate(8)) for k in range(2)]
            starts = sum(1 << s for s in range(ESIZES) if w % max(1, (1 << s) // per_word) == 0)
            start = Const(starts, ESIZES).bit_select(self.esize, 1)
            # word-local sum (carry in: the subtract's 1 where an element starts here)
            s0, s1 = Signal(9, name=f"sum{2 * w}l"), Signal(9, name=f"sum{2 * w + 1}l")
            m.d.comb += [s0.eq(A[2 * w] + bx[0] + (start & inv)),
                         s1.eq(A[2 * w + 1] + bx[1] + Mux(self.esize == 0, inv, s0[8]))]
            m.d.comb += self.word_sum[w].eq(Cat(s0[:8], s1[:8]))
            # carry from the word below inside 32/64-bit elements: increment
            c_in = 0 if carry is None else (~start & carry)
            final = Signal(17, name=f"word{w}")
            m.d.comb += final.eq(Cat(s0[:8], s1[:8]) + c_in)
            fcout = Signal(name=f"cout{w}")
            m.d.comb += fcout.eq(s1[8] | final[16])
            for k, (byte, c) in enumerate(((final[:8], s0[8]), (final[8:16], fcout))):
                i = 2 * w + k
                v = Signal(name=f"v{i}")
                m.d.comb += v.eq((A[i][7] == bx[k][7]) & (byte[7] != A[i][7]))
                e = Signal(name=f"eqb{i}")
                m.d.comb += e.eq(A[i] == B[i])
                sums.append(byte)
                cout.append(c)
                ovf.append(v)
                eqb.append(e)
            carry = fcout

        out = []
        fn = self.fn
        for i in range(nbytes):
            def per_size(pick, i=i):
                return Cat(*(pick(s) for s in range(ESIZES))).bit_select(self.esize, 1)

            def top(s: int, i=i) -> int:
                return i | ((1 << s) - 1)

            c = per_size(lambda s: cout[top(s)])
            v = per_size(lambda s: ovf[top(s)])
            n = per_size(lambda s: sums[top(s)][7])
            a_neg = per_size(lambda s: A[top(s)][7])
            eq = per_size(lambda s, i=i: Cat(*(eqb[j] for j in range(i & ~((1 << s) - 1),
                                                                 (i | ((1 << s) - 1)) + 1))).all())
            is_top = per_size(lambda s, i=i: Const(int(i % (1 << s) == (1 << s) - 1), 1))
            lt_s = n ^ v            # a < b, signed (adder computes a - b)
            lt_u = ~c               # a < b, unsigned (borrow)
            sat = Mux(a_neg, Mux(is_top, 0x80, 0x00), Mux(is_top, 0x7F, 0xFF))
            r = Signal(8, name=f"r{i}")
            with m.Switch(fn):
                with m.Case(AluFn.ADD, AluFn.SUB):
                    m.d.comb += r.eq(sums[i])
                with m.Case(AluFn.ADDS, AluFn.SUBS):
                    m.d.comb += r.eq(Mux(v, sat, sums[i]))
                with m.Case(AluFn.ADDUS):
                    m.d.comb += r.eq(Mux(c, 0xFF, sums[i]))
                with m.Case(AluFn.SUBUS):
                    m.d.comb += r.eq(Mux(c, sums[i], 0x00))
                with m.Case(AluFn.CMPEQ):
                    m.d.comb += r.eq(eq.replicate(8))
                with m.Case(AluFn.CMPGT):
                    m.d.comb += r.eq((~lt_s & ~eq).replicate(8))
                with m.Case(AluFn.MINS):
                    m.d.comb += r.eq(Mux(lt_s, A[i], B[i]))
                with m.Case(AluFn.MAXS):
                    m.d.comb += r.eq(Mux(lt_s, B[i], A[i]))
                with m.Case(AluFn.MINU):
                    m.d.comb += r.eq(Mux(lt_u, A[i], B[i]))
                with m.Case(AluFn.MAXU):
                    m.d.comb += r.eq(Mux(lt_u, B[i], A[i]))
                with m.Case(AluFn.AND):
                    m.d.comb += r.eq(A[i] & B[i])
                with m.Case(AluFn.OR):
                    m.d.comb += r.eq(A[i] | B[i])
                with m.Case(AluFn.XOR):
                    m.d.comb += r.eq(A[i] ^ B[i])
                with m.Case(AluFn.ANDN):
                    m.d.comb += r.eq(~A[i] & B[i])
            out.append(r)
        flat = Cat(*out)
        m.d.comb += [self.result[w].eq(flat.word_select(w, WORD_BITS)) for w in range(self.words)]
        return m
