"""Assembler for Intel-syntax x86-64 with T-SAR mnemonics.

Standard instructions and directives go to keystone-engine. Each T-SAR statement is encoded by
:mod:`tsar.isa.codec` and handed to keystone as a ``.byte`` directive of its exact length, in the
same keystone run, so labels and branches across T-SAR code stay right. Label and line addresses
come out of that run too: a table of ``.quad`` entries appended after the program records them.

Source conventions: one statement per line; comments start with ``;``, ``#`` or ``//``; labels are
``name:``; a T-SAR memory operand that names a label is RIP-relative (``[rip + table]``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from keystone import KS_ARCH_X86, KS_MODE_64, KS_OPT_SYNTAX_INTEL, Ks, KsError

from tsar.common.errors import UserError
from tsar.isa import codec, syntax
from tsar.isa.config import registry_version
from tsar.isa.instructions import mnemonics
from tsar.isa.modrm import INT32_MAX, INT32_MIN
from tsar.isa.operands import Memory

_LABEL_RE = re.compile(r"^\s*([A-Za-z_.$][\w.$@?]*)\s*:(?!:)")
_WORD_RE = re.compile(r"[A-Za-z_.$][\w.$@?]*")
_BRACKET_RE = re.compile(r"\[([^\]]*)\]")
_LINE_MARK = "__tsar_line_{}"
_END_MARK = "__tsar_end"
_TSAR_FAMILY_RE = re.compile(r"^(tlut|tgemv)\d+x\d+$")
_INT_LITERAL_RE = re.compile(
    r"(?<![\w.$@?])(?:0[xX](?P<hex>[0-9a-fA-F]+)|0[bB](?P<bin>[01]+)|(?P<hsuf>[0-9][0-9a-fA-F]*)[hH]"
    r"|(?P<dec>[0-9]+))(?![\w.$@?])")
_COMMENT_OR_QUOTE_RE = re.compile(r"[;#/\"']")
_QUOTED_RE = re.compile(r"(\"(?:[^\"\\]|\\.)*\"|'(?:[^'\\]|\\.)*')")

# Words that may appear in an operand without being a label (for "undefined label" messages).
_NOT_LABELS = frozenset(
    [f"{p}{n}" for p in ("xmm", "ymm", "zmm") for n in range(32)]
    + [f"r{n}{s}" for n in range(8, 16) for s in ("", "d", "w", "b")]
    + [f"k{n}" for n in range(8)] + [f"st{n}" for n in range(8)] + [f"mm{n}" for n in range(8)]
    + ["rax", "rbx", "rcx", "rdx", "rsi", "rdi", "rsp", "rbp", "rip",
       "eax", "ebx", "ecx", "edx", "esi", "edi", "esp", "ebp", "eip",
       "ax", "bx", "cx", "dx", "si", "di", "sp", "bp",
       "al", "bl", "cl", "dl", "sil", "dil", "spl", "bpl", "ah", "bh", "ch", "dh",
       "cs", "ds", "es", "fs", "gs", "ss", "ptr", "byte", "word", "dword", "qword", "tbyte",
       "xmmword", "ymmword", "zmmword", "oword", "offset", "short", "near", "far", "rel"]
)


class AssemblyError(UserError):
    """An error in the source, located at ``file:line``; ``str()`` is one line."""

    def __init__(self, file: str, line: int, text: str, message: str) -> None:
        super().__init__(message)
        self.file, self.line, self.text, self.message = file, line, text.strip(), message

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: error: {self.message}" + (f" [in: {self.text}]" if self.text else "")


@dataclass(frozen=True)
class ListingEntry:
    """One source line: its address, the bytes it produced (possibly none) and its text."""

    line: int
    address: int
    data: bytes
    source: str
    tsar: bool


@dataclass
class Program:
    """Assembled machine code placed at ``base``, with its labels and a listing."""

    code: bytes
    base: int
    symbols: dict[str, int]
    listing: list[ListingEntry] = field(default_factory=list)
    source_name: str = "<input>"

    def address_of(self, label: str) -> int:
        try:
            return self.symbols[label]
        except KeyError:
            raise KeyError(f"no label {label!r} in {self.source_name}") from None

    def listing_text(self, bytes_per_row: int = 10) -> str:
        """objdump-like listing: address, bytes and the source line; T-SAR lines are marked ``T``."""
        width = 3 * bytes_per_row
        rows = []
        for entry in self.listing:
            chunks = [entry.data[i:i + bytes_per_row] for i in range(0, len(entry.data), bytes_per_row)]
            chunks = chunks or [b""]
            mark = "T" if entry.tsar else " "
            for n, chunk in enumerate(chunks):
                hexes = " ".join(f"{b:02x}" for b in chunk).ljust(width)
                text = entry.source if n == 0 else ""
                addr = f"{entry.address:8x}" if chunk or n == 0 else ""
                rows.append(f"{entry.line:5d} {addr:>8} {mark} {hexes} {text}".rstrip())
        return "\n".join(rows)


@dataclass
class _Statement:
    number: int
    raw: str
    labels: list[str]
    body: str
    tsar: codec.TsarInstruction | None = None


def strip_comment(line: str) -> str:
    """Remove a ``;``, ``#`` or ``//`` comment that is not inside a string literal."""
    if not _COMMENT_OR_QUOTE_RE.search(line):
        return line
    quote = None
    for pos, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch in ";#" or line.startswith("//", pos):
            return line[:pos]
    return line


def assemble(source: str, *, base: int = 0, filename: str = "<input>") -> Program:
    """Assemble ``source`` for address ``base``; raises :class:`AssemblyError` on bad input."""
    statements = _parse(source, filename)
    labels = {name: st for st in statements for name in st.labels}
    known = set(labels)
    for st in statements:
        if st.tsar is not None:
            for sym in _symbols(st.tsar):
                if sym not in known:
                    raise AssemblyError(filename, st.number, st.raw, f"undefined label {sym!r}")

    # Pass 1: T-SAR lines as placeholders of their exact length (symbols encode as disp32).
    placeholder = {name: base for name in known}
    first = {i: _encode(st.tsar, base, placeholder) for i, st in enumerate(statements) if st.tsar is not None}
    index = {id(st): i for i, st in enumerate(statements)}
    pass1 = _keystone_source(statements, lambda st: first[index[id(st)]])
    code = _run_keystone(pass1, base, statements, filename, labels)
    addresses = _addresses(code, len(statements), list(labels))
    line_addr = addresses[: len(statements) + 1]
    symbols = dict(zip(labels, addresses[len(statements) + 1:], strict=True))

    # Pass 2: the real encodings, now that every address is known (the same source, and so the same
    # code, when no T-SAR statement's encoding changed: one that names no label).
    encodings: dict[int, bytes] = {}
    for i, st in enumerate(statements):
        if st.tsar is not None:
            try:
                encodings[i] = _encode(st.tsar, line_addr[i], symbols)
            except codec.EncodingError as exc:
                raise AssemblyError(filename, st.number, st.raw, str(exc)) from None
    if encodings != first:
        pass2 = _keystone_source(statements, lambda st: encodings[index[id(st)]])
        code = _run_keystone(pass2, base, statements, filename, labels)
        if _addresses(code, len(statements), list(labels)) != addresses:
            raise RuntimeError("internal: layout changed between assembler passes")
    code = code[: line_addr[-1] - base]
    _check_output(statements, line_addr, code, base, filename, registry_version())

    listing = [
        ListingEntry(st.number, line_addr[i], code[line_addr[i] - base: line_addr[i + 1] - base],
                     st.raw.rstrip(), st.tsar is not None)
        for i, st in enumerate(statements)
    ]
    return Program(code, base, symbols, listing, filename)


def _encode(inst: codec.TsarInstruction, address: int, symbols: dict[str, int]) -> bytes:
    """:func:`codec.encode`; an instruction that names no label encodes the same at every address
    (cached)."""
    if any(True for _ in _symbols(inst)):
        return codec.encode(inst, address, symbols)
    return _encode_anywhere(inst)


@lru_cache(maxsize=1 << 12)
def _encode_anywhere(inst: codec.TsarInstruction) -> bytes:
    return codec.encode(inst, 0, {})


def assemble_file(path: str | Path, *, base: int = 0) -> Program:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise AssemblyError(str(path), 0, "", f"cannot read source: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[:exc.start].count(b"\n") + 1
        raise AssemblyError(str(path), line, "",
                            f"not UTF-8 text (byte {exc.object[exc.start]:#04x})") from None
    if not any(strip_comment(line).strip() for line in text.removeprefix("\ufeff").splitlines()):
        raise AssemblyError(str(path), 0, "", "no instructions or labels in the file")
    return assemble(text, base=base, filename=str(path))


# --- parsing -------------------------------------------------------------------------------------

def _parse(source: str, filename: str) -> list[_Statement]:
    statements = []
    seen: dict[str, int] = {}
    version = registry_version()
    source = source.removeprefix("\ufeff")  # a byte-order mark is not text
    for number, raw in enumerate(source.splitlines(), start=1):
        labels, body, problem = _split_line(raw)
        if problem is None:
            for name in labels:
                if name in seen:
                    problem = f"label {name!r} already defined at line {seen[name]}"
                    break
                seen[name] = number
        tsar = None
        if problem is None:
            tsar, problem = _body_meaning(body, version)
        if problem is not None:
            shown = raw if body.isascii() else raw.encode("ascii", "replace").decode()
            raise AssemblyError(filename, number, shown, problem)
        statements.append(_Statement(number, raw, list(labels), body, tsar))
    return statements


@lru_cache(maxsize=1 << 16)
def _split_line(raw: str) -> tuple[tuple[str, ...], str, str | None]:
    """A source line's labels, its statement (comment removed) and what is wrong with either (None
    when nothing is). Cached, as every function of one line alone: generated kernels repeat lines."""
    body = strip_comment(raw).strip()
    odd = next((ch for ch in body if not ch.isascii()), None)
    if odd is not None:
        return (), body, (f"non-ASCII character {odd!r} (U+{ord(odd):04X}); assembly is ASCII "
                          "(e.g. 'x' or '*' for a product)")
    labels = []
    while match := _LABEL_RE.match(body):
        name = match.group(1)
        if name.startswith("__tsar_"):
            return (), body, f"label {name!r} uses a reserved prefix"
        labels.append(name)
        body = body[match.end():].strip()
    return tuple(labels), body, None


@lru_cache(maxsize=1 << 16)
def _body_meaning(body: str, version: int) -> tuple[codec.TsarInstruction | None, str | None]:
    """A statement's T-SAR instruction (None for any other statement) and what refuses it (None
    when it is accepted here; keystone judges the rest), with the configurations registered at
    :func:`~tsar.isa.config.registry_version` ``version``."""
    word = body.split(None, 1)[0].lower() if body else ""
    st = _Statement(0, body, [], body)
    try:
        if word in mnemonics():
            return _parse_tsar(st, word, ""), None
        if _TSAR_FAMILY_RE.match(word):
            known = ", ".join(sorted(mnemonics()))
            return None, f"unknown T-SAR mnemonic {word!r} (registered: {known})"
        if body and not body.startswith("."):
            _check_text(st, "")
            _check_displacements(st, "")
    except AssemblyError as exc:
        return None, exc.message
    return None, None


def _parse_tsar(st: _Statement, mnemonic: str, filename: str) -> codec.TsarInstruction:
    rest = st.body.split(None, 1)[1] if len(st.body.split(None, 1)) > 1 else ""
    try:
        operands = [syntax.parse_operand(t) for t in syntax.split_operands(rest)]
        inst = codec.make(mnemonic, *operands)
        codec.encode(inst, 0, dict.fromkeys(_symbols(inst), 0))  # encodable at all?
        return inst
    except (syntax.SyntaxProblem, codec.EncodingError) as exc:
        raise AssemblyError(filename, st.number, st.raw, str(exc)) from None


_ATT_RE = re.compile(r"(?:^|[\s,(])(?:%[a-z]|\$(?:-?\d|[a-z_]))", re.IGNORECASE)
_HIGH8_RE = re.compile(r"\b[abcd]h\b", re.IGNORECASE)
_REX_ONLY_RE = re.compile(r"\b(?:r(?:[89]|1[0-5])[bwd]?|spl|bpl|sil|dil)\b", re.IGNORECASE)
_GPR64_RE = re.compile(r"\b(?:r[abcd]x|r[sd]i|r[sb]p)\b", re.IGNORECASE)


def _check_text(st: _Statement, filename: str) -> None:
    """Refuse text that keystone would silently mis-assemble or abort on: AT&T syntax (assembles
    to nothing), unbalanced brackets (``[rdi`` becomes an absolute address), and a high-byte
    register beside an operand that needs a REX prefix (keystone aborts the process)."""
    body = st.body
    if _ATT_RE.search(body):
        raise AssemblyError(filename, st.number, st.raw,
                            "AT&T syntax is not supported: write Intel syntax, destination first, "
                            "without % and $ (e.g. 'mov rax, rdi')")
    if body.count("[") != body.count("]") or re.search(r"\][^\[]*\]|\[[^\]]*\[", body):
        raise AssemblyError(filename, st.number, st.raw, "unbalanced '[' and ']' in a memory operand")
    high = _HIGH8_RE.search(body)
    if high:
        outside = _BRACKET_RE.sub("", body)
        rex = _REX_ONLY_RE.search(body) or _GPR64_RE.search(outside)
        if rex:
            raise AssemblyError(filename, st.number, st.raw,
                                f"{high.group(0)} cannot be encoded in an instruction that needs a REX "
                                f"prefix (because of {rex.group(0)})")


def _check_output(statements: list[_Statement], line_addr: list[int], code: bytes, base: int,
                  filename: str, version: int) -> None:
    """Every instruction line must produce bytes that decode back, whole, as valid x86."""
    for i, st in enumerate(statements):
        if st.tsar is not None or not st.body or st.body.startswith("."):
            continue
        lo, hi = line_addr[i] - base, line_addr[i + 1] - base
        if hi <= lo:
            raise AssemblyError(filename, st.number, st.raw,
                                "the statement produced no bytes (keystone did not understand it)")
        if not _decodes_whole(code[lo:hi], version):
            raise AssemblyError(filename, st.number, st.raw,
                                f"the statement assembled to bytes that do not decode: "
                                f"{code[lo:hi].hex(' ')}")


@lru_cache(maxsize=1 << 16)
def _decodes_whole(code: bytes, version: int) -> bool:
    """Whether ``code`` decodes, to its end, as valid x86 (at any address: validity does not depend
    on it) with the configurations of registry ``version`` (the T-SAR opcode maps)."""
    from tsar.isa.stream import decode_stream

    return all(decoded.valid for decoded in decode_stream(code, 0))


def _check_displacements(st: _Statement, filename: str) -> None:
    """Refuse numeric displacements beyond 32 bits, which keystone would silently truncate."""
    for match in _BRACKET_RE.finditer(st.body):
        try:
            mem = syntax.parse_memory(None, match.group(1), match.group(0))
        except syntax.SyntaxProblem:
            continue  # keystone judges what our parser does not model
        if mem.symbol is None and not INT32_MIN <= mem.disp <= INT32_MAX:
            raise AssemblyError(filename, st.number, st.raw,
                                f"displacement {mem.disp:#x} does not fit in a signed 32-bit field")


def _symbols(inst: codec.TsarInstruction) -> Iterable[str]:
    for op in inst.operands:
        if isinstance(op, Memory) and op.symbol is not None:
            yield op.symbol


# --- keystone ------------------------------------------------------------------------------------

@lru_cache(maxsize=1 << 16)
def radix_free(body: str) -> str:
    """``body`` with every integer literal (decimal, ``0x``, ``0b``, ``...h``) written as ``0x`` hex.

    keystone 0.9.2 leaves its lexer's default radix uninitialised unless an option is set, so a bare
    ``224`` assembles as 224 or as 0x224 depending on heap contents (keystone-engine/keystone #528);
    :func:`_run_keystone` sets the syntax option (which fixes the radix at 16) and hands it only
    prefixed literals, which mean the same in every radix. Quoted strings are left alone."""
    def literal(m: re.Match[str]) -> str:
        if m["hex"] is not None:
            return m.group(0)
        if m["bin"] is not None:
            return hex(int(m["bin"], 2))
        if m["hsuf"] is not None:
            return hex(int(m["hsuf"], 16))
        return hex(int(m["dec"], 10))

    parts = _QUOTED_RE.split(body)
    return "".join(part if i % 2 else _INT_LITERAL_RE.sub(literal, part) for i, part in enumerate(parts))


def _keystone_source(statements: list[_Statement], tsar_bytes) -> str:
    lines = []
    for i, st in enumerate(statements):
        lines.append(f"{_LINE_MARK.format(i)}:")
        lines += [f"{name}:" for name in st.labels]
        if st.tsar is not None:
            lines.append(_byte_directive(tsar_bytes(st)))
        elif st.body:
            lines.append(radix_free(st.body))
    lines.append(f"{_END_MARK}:")
    marks = [_LINE_MARK.format(i) for i in range(len(statements))] + [_END_MARK]
    names = marks + [name for st in statements for name in st.labels]
    lines += [f".quad {name}" for name in names]
    return "\n".join(lines) + "\n"


@lru_cache(maxsize=1 << 12)
def _byte_directive(code: bytes) -> str:
    return ".byte " + ", ".join(f"{b:#04x}" for b in code)


def _addresses(table: bytes, n_lines: int, labels: list[str]) -> list[int]:
    count = n_lines + 1 + len(labels)
    raw = table[-8 * count:] if count else b""
    return [int.from_bytes(raw[8 * i: 8 * i + 8], "little") for i in range(count)]


def _keystone() -> Ks:
    """A keystone engine for x86-64 Intel syntax with a defined radix (16; see :func:`radix_free`)."""
    ks = Ks(KS_ARCH_X86, KS_MODE_64)
    ks.syntax = KS_OPT_SYNTAX_INTEL
    return ks


def keystone_code(text: str, base: int = 0) -> bytes:
    """Machine code of plain x86-64 Intel-syntax ``text`` (no T-SAR statements, no diagnostics)
    at address ``base``, through keystone with a defined radix: for code that the project itself
    generates (stubs, probes). Raises :class:`keystone.KsError` on bad text."""
    encoding, _ = _keystone().asm(radix_free(text), base)
    return bytes(encoding or b"")


def _run_keystone(text: str, base: int, statements: list[_Statement], filename: str,
                  labels: dict[str, _Statement]) -> bytes:
    try:
        encoding, _ = _keystone().asm(text, base)
    except KsError as exc:
        raise _locate_keystone_error(exc, statements, filename, labels) from None
    return bytes(encoding or b"")


def _locate_keystone_error(exc: KsError, statements: list[_Statement], filename: str,
                           labels: dict[str, _Statement]) -> AssemblyError:
    """Find the first line whose prefix of the program fails, and describe the error."""
    def fails(n: int) -> KsError | None:
        defined = {name for st in statements[:n] for name in st.labels}
        text = "\n".join(
            [f"{name}:" for st in statements[:n] for name in st.labels] +
            [radix_free(st.body) for st in statements[:n] if st.body and st.tsar is None] +
            ["nop"] + [f"{name}:" for name in labels if name not in defined]
        )
        try:
            _keystone().asm(text, 0)
        except KsError as err:
            return err
        return None

    lo, hi = 0, len(statements)  # invariant: prefix lo passes, prefix hi fails (assumed)
    if fails(hi) is None:
        st = next((s for s in statements if s.body and s.tsar is None), statements[0])
        return AssemblyError(filename, st.number, st.raw, f"keystone: {exc}")
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(mid) is None:
            lo = mid
        else:
            hi = mid
    st = statements[hi - 1]
    return AssemblyError(filename, st.number, st.raw, _describe(fails(hi), st, labels))


def _describe(err: KsError | None, st: _Statement, labels: dict[str, _Statement]) -> str:
    text = str(err)
    if "MNEMONICFAIL" in text:
        word = st.body.split(None, 1)[0]
        return f"unknown mnemonic {word!r}"
    if "SYMBOL_MISSING" in text:
        words = _WORD_RE.findall(st.body)[1:]
        missing = [w for w in words if w.lower() not in _NOT_LABELS and w not in labels]
        if missing:
            return f"undefined label {missing[0]!r}"
        return "undefined symbol"
    if "INVALIDOPERAND" in text:
        return "invalid operand for this instruction"
    return f"keystone rejected the statement: {text}"
