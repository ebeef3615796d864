"""Bad input across every command: a one-line error on stderr naming what is wrong (and where,
file:line for assembly), a non-zero exit, no traceback, no hang, no output that looks valid."""

from __future__ import annotations

import numpy as np
import pytest

from tsar.cli.main import main
from tsar.paths import kernel_source

GEMV = str(kernel_source("gemv16_c2s4.s"))
SOURCES = {
    "att.s": "f:\n  movq %rdi, %rax\n  ret\n",
    "bracket.s": "f:\n  mov rax, [rdi\n  ret\n",
    "times.s": "f:\n  mov eax, 2\u00d73\n  ret\n",
    "garbage.s": "garbage here\n",
    "empty.s": "   ; only a comment\n",
    "read.s": "f:\n  movzx eax, byte ptr [rdi + 2559]\n  ret\n",
    "loop.s": "f:\n  jmp f\n",
    "vloop.s": "f:\n  vpxor xmm0, xmm0, xmm0\n  jmp f\n",
    "badtsar.s": "f:\n  tlut2x4 ymm1, qword ptr [rsi]\n  ret\n",
    "badlabel.s": "f:\n  jmp nowhere\n",
}

# (argv with {d} for the test's directory, a fragment the one-line message must contain)
CASES = [
    # assembler
    (["asm", "{d}/att.s"], "att.s:2: error: AT&T syntax"),
    (["asm", "{d}/bracket.s"], "bracket.s:2: error: unbalanced"),
    (["asm", "{d}/times.s"], "times.s:2: error: non-ASCII character"),
    (["asm", "{d}/nofile.s"], "No such file"),
    (["asm", "{d}/empty.s"], "no instructions"),
    (["asm", "{d}"], "Is a directory"),
    (["asm", GEMV, "--base", "zz"], "--base: expected an integer"),
    (["asm", "{d}/badtsar.s"], "badtsar.s:2: error"),
    (["asm", "{d}/badlabel.s"], "badlabel.s:2"),
    (["asm", "{d}/bin.s"], "not UTF-8"),
    # uarch measure (each refused before anything is measured)
    (["uarch", "measure", "--compare", "zen9"], "--compare 'zen9': unknown table"),
    (["uarch", "measure", "--forms", "nosuchmnemonic"], "matches no supported form"),
    (["uarch", "measure", "--trials", "0"], "--trials: expected an integer >= 1"),
    (["uarch", "measure", "--quick", "--out", "{d}"], "is a directory"),
    (["uarch", "measure", "--quick", "--out", "{d}/table.txt"], "is a .csv file"),
    # disassembler
    (["disasm", "--hex", "c4 e8 7"], "even number of hex digits"),
    (["disasm", "--hex", "zz"], "hex"),
    (["disasm", "{d}/nofile.bin"], "No such file"),
    # run: files and arguments
    (["run", "{d}/garbage.s"], "garbage.s:1: error: unknown mnemonic"),
    (["run", "{d}/att.s"], "AT&T syntax"),
    (["run", "{d}/nofile.s"], "no such file"),
    (["run", GEMV, "--fn", "gemv16_c2s4", "--arg", "i8:0", "--arg", "u8:10240", "--out", "i32:16",
      "--arg", "2560"], "past its end"),
    (["run", "{d}/read.s", "--arg", "99999999999999999999999"], "unmapped"),
    (["run", "{d}/read.s", "--arg", "i8:2560:fill=1000"], "outside i8's range"),
    (["run", "{d}/read.s", "--arg", "i8:4:fill=x"], "bad fill value"),
    (["run", "{d}/read.s", "--seed", "-1"], "--seed: expected an integer >= 0"),
    (["run", "{d}/read.s", "--arg", "i8:-5"], "negative size"),
    (["run", "{d}/read.s", "--arg", "i8:2x"], "bad shape"),
    (["run", "{d}/read.s", "--arg", "q8:4"], "bad argument"),
    (["run", "{d}/read.s", "--arg", "i8:4:wat"], "unknown initializer"),
    (["run", "{d}/read.s", "--arg", "u8:100000x100000x100"], "GiB"),
    (["run", "{d}/read.s", "--fn", "nope"], "nope"),
    (["run", "{d}/read.s", "--returns", "i128"], "--returns"),
    (["run", "{d}/read.s", "--max-instructions", "0"], "--max-instructions: expected an integer >= 1"),
    (["run", "{d}/read.s", "--timeout", "0"], "--timeout: expected a finite number > 0"),
    (["run", "{d}/read.s", "--timeout", "nan"], "--timeout"),
    (["run", "{d}/loop.s", "--max-instructions", "1000"], "instruction limit of 1,000"),
    (["run", "{d}/vloop.s", "--max-instructions", "1000"], "instruction limit"),
    (["run", "{d}/loop.s", "--timeout", "0.2"], "wall-time limit"),
    (["run", "{d}/read.s", "--engine", "native", "--trace", "t.npz"], "need --engine python"),
    (["run", "{d}/read.s", "--engine", "qemu"], "--engine"),
    (["run", "{d}/read.s", "--hot", "-1"], "--hot"),
    # run: BitLinear kernels and models
    (["run", "gemv", "--shape", "1x100000000x100000000"], "at most"),
    (["run", "gemv", "--fn", "x"], "apply to .s/.so files"),
    (["run", "gemv", "--arg", "3"], "apply to .s/.so files"),
    (["run", "gemv", "--shape", "2x64x256"], "gemv takes one token"),
    (["run", "gemv", "--shape", "1x64"], "expected N x M x K"),
    (["run", "gemv", "--shape", "1x65x256", "--kernel", "tsar-c2s4-op"], "multiple of 16"),
    (["run", "gemm", "--shape", "0x64x256", "--kernel", "tsar-c2s4-op"], "positive"),
    (["run", "gemv", "--kernel", "nope"], "unknown kernel 'nope'"),
    (["run", "model"], "needs a model name"),
    (["run", "model", "gpt9"], "unknown model 'gpt9'"),
    (["run", "model", "bitnet-b1.58-2b-4t", "--tokens", "0"], "--tokens: expected an integer >= 1"),
    (["run", "model", "bitnet-b1.58-2b-4t", "--layers", "0"], "--layers: expected an integer >= 1"),
    (["run", "model", "bitnet-b1.58-2b-4t", "--weights", "{d}/nofile.npz"], "no weights file"),
    (["run", "{d}/read.s", "extra"], "unexpected argument 'extra'"),
    # compare
    (["compare", "--threads", "1000"], "hardware threads"),
    (["compare", "--threads", "0"], "--threads: expected an integer >= 1"),
    (["compare", "--repeats", "0"], "--repeats: expected an integer >= 1"),
    (["compare", "--model", "llama3-8b", "--shape", "1x64x256"], "exclude each other"),
    (["compare", "--platform", "mars"], "unknown platform 'mars'"),
    (["compare", "--shape", "0x1x1"], "sizes must be positive"),
    (["compare", "--model", "gpt9"], "unknown model 'gpt9'"),
    (["compare", "--platform", "laptop", "--threads", "99"], "laptop has"),
    # validate-model
    (["validate-model", "--calls", "0"], "--calls: expected an integer >= 1"),
    (["validate-model", "--rounds", "0"], "--rounds: expected an integer >= 1"),
    (["validate-model", "--shape", "60x384"], "--shape 60x384"),
    (["validate-model", "--shape", "abc"], "shape must be MxK"),
    (["validate-model", "--kernel", "dense"], "--kernel"),
    (["validate-model", "--target", "-1"], "--target"),
    # bench-sim, bench-native
    (["bench-sim", "--repeat", "0"], "--repeat: expected an integer >= 1"),
    (["bench-sim", "--k", "7"], "multiple of 8"),
    (["bench-sim", "--n", "0"], "--n: expected an integer >= 1"),
    (["bench-sim", "--m", "0"], "--m: expected an integer >= 1"),
    (["bench-sim", "--kernel", "nope"], "unknown T-SAR kernel"),
    (["bench-native", "--where", "everywhere"], "--where"),
    (["bench-native", "--threads", "0"], "--threads"),
    (["bench-native", "--repeats", "0"], "--repeats"),
    (["bench-native", "--shapes", "1x2x"], "--shapes"),
    (["bench-native", "--kernels", "zz"], "unknown zz"),
    # rtl
    (["rtl", "sim", "--cases", "-1"], "--cases: expected an integer >= 1"),
    (["rtl", "sim", "--config", "c9s9"], "unknown T-SAR configuration 'c9s9'"),
    (["rtl", "verilog", "-o", "{d}/read.s"], "is not a directory"),
    (["rtl", "area", "--config", "zz"], "unknown T-SAR configuration"),
    (["rtl", "bogus"], "invalid choice"),
    # report, demo, isa, time, sim
    (["report", "-o", "{d}/nodir/x.html"], "does not exist"),
    (["report", "-o", "{d}"], "is a directory"),
    (["report", "--repeats", "0"], "--repeats: expected an integer >= 1"),
    (["demo", "--repeats", "0"], "--repeats: expected an integer >= 1"),
    (["demo", "--seed", "-3"], "--seed"),
    (["isa", "--markdown", "{d}/nodir/x.md"], "No such file"),
    (["time", "{d}/garbage.s"], "garbage.s:1: error"),
    (["time", GEMV, "--threads", "0"], "--threads must be at least 1"),
    (["time", GEMV, "--platform", "mars"], "unknown platform"),
    (["sim", "coverage", "--bogus"], "unrecognized arguments"),
    (["nope"], "invalid choice"),
]

# Every file a user names, binary (the bytes 0..255: a NUL first) and Latin-1 text (not UTF-8): one
# line naming the file and what is wrong with it. {bad} is "bin8" or "lat1" (BAD_FILES).
BAD_FILES = {"bin8": bytes(range(256)), "lat1": "; caf\u00e9\nf:\n  ret\n".encode("latin-1")}
WHY = {"bin8": "binary content (NUL byte at offset 0", "lat1": "not a UTF-8 text file (byte 0xe9 at offset 5"}
FILE_CASES = [
    (["run", "{d}/{bad}.s"], "{bad}.s: {why}"),
    (["time", "{d}/{bad}.s"], "{bad}.s: {why}"),
    (["sweep", "{d}/{bad}.toml"], "{bad}.toml: {why}"),
    (["compare", "--platform", "{d}/{bad}.toml"], "{bad}.toml: {why}"),
    (["compare", "--model", "bitnet-b1.58-2b-4t", "--platform", "{d}/{bad}.toml"], "{bad}.toml: {why}"),
    (["time", GEMV, "--platform", "{d}/{bad}.toml"], "{bad}.toml: {why}"),
    (["--isa", "{d}/{bad}.toml", "isa"], "{bad}.toml: {why}"),
    (["isa", "--isa", "{d}/{bad}.toml"], "{bad}.toml: {why}"),
    (["rtl", "area", "--isa", "{d}/{bad}.toml"], "{bad}.toml: {why}"),
    (["report", "--sweep", "{d}/{bad}.csv", "-o", "{d}/r.html"], "{bad}.csv: {why}"),
    (["asm", "{d}/{bad}.s"], "{bad}.s:"),
    # not a NumPy file, not an ELF shared object
    (["run", GEMV, "--arg", "{d}/{bad}.npy"], "{bad}.npy: not a NumPy array (.npy)"),
    (["run", "model", "bitnet-b1.58-2b-4t", "--weights", "{d}/{bad}.npz"], "{bad}.npz: not a weights"),
    (["run", "{d}/{bad}.so"], "{bad}.so: not a little-endian ELF64 file"),
    (["time", "{d}/{bad}.so"], "{bad}.so: not a little-endian ELF64 file"),
]
CASES += [([a.replace("{bad}", bad) for a in argv], fragment.replace("{bad}", bad).replace("{why}", WHY[bad]))
          for argv, fragment in FILE_CASES for bad in BAD_FILES]
CASES += [
    (["run", "{d}/trunc.so"], "trunc.so: truncated or malformed ELF file"),
    (["time", "{d}/trunc.so"], "trunc.so: truncated or malformed ELF file"),
    (["run", "{d}/nofile.so"], "no such file"),
    (["sweep", "{d}/nofile.toml"], "nofile.toml: cannot read a sweep spec (.toml): No such file"),
    (["compare", "--platform", "{d}"], "cannot read a platform .toml file: Is a directory"),
    (["run", GEMV, "--arg", "{d}/nofile.npy"], "nofile.npy: cannot read"),
    (["run", GEMV, "--arg", "{d}/arrays.npz.npy"], "not a NumPy array (.npy): a .npz archive"),
]


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    d = tmp_path_factory.mktemp("bad")
    for name, text in SOURCES.items():
        (d / name).write_text(text)
    (d / "bin.s").write_bytes(b"f:\n  ret \xff\n")
    for stem, data in BAD_FILES.items():
        for suffix in (".s", ".so", ".toml", ".csv", ".npy", ".npz"):
            (d / stem).with_suffix(suffix).write_bytes(data)
    (d / "trunc.so").write_bytes(b"\x7fELF\x02\x01\x01" + bytes(9) + b"\x03\x00\x3e\x00" + b"\xff" * 40)
    np.savez(d / "arrays.npz", a=np.zeros(2))
    (d / "arrays.npz").rename(d / "arrays.npz.npy")
    return d


def test_battery_is_large_enough():
    assert len(CASES) >= 60


@pytest.mark.parametrize("argv, fragment", CASES, ids=[" ".join(a)[:60] for a, _ in CASES])
def test_bad_input(argv, fragment, sources, capsys):
    argv = [a.replace("{d}", str(sources)) for a in argv]
    try:
        code = main(argv)
    except SystemExit as exc:  # argparse usage errors
        code = exc.code
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip() and not line.startswith("  ..")]
    assert code not in (0, None), f"exit {code}: {captured.out[-300:]}"
    assert len(lines) == 1, lines
    assert fragment in lines[0], lines[0]
    assert "Traceback" not in captured.err
