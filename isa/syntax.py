"""Intel-syntax operand parser for T-SAR statements (``ymm8``, ``qword ptr [rsi + rax*4 + 16]``).

Numbers follow keystone's Intel defaults: decimal, or ``0x``/``0b``/``0o`` prefixes, or an ``h``
suffix for hexadecimal. A label inside brackets must be RIP-relative: ``[rip + table]``.
"""

from __future__ import annotations

import re

from tsar.common.errors import UserError
from tsar.isa.instructions import MEMORY_SIZE_NAMES
from tsar.isa.operands import GPR_NUMBER, Memory, Operand, Register


class SyntaxProblem(UserError, ValueError):
    """Operand text that does not parse."""


_SIZE_BY_NAME = {name: size for size, name in MEMORY_SIZE_NAMES.items()}
_VECTOR_RE = re.compile(r"^(xmm|ymm|zmm)(\d+)$")
_IDENT_RE = re.compile(r"^[A-Za-z_.$@?][\w.$@?]*$")
_MEM_RE = re.compile(r"^(?:(?P<size>\w+)\s+ptr\s*)?\[(?P<addr>[^\]]*)\]$", re.IGNORECASE)
_TERM_SPLIT_RE = re.compile(r"\s*([+-])\s*")


def split_operands(text: str) -> list[str]:
    """Split on commas that are not inside brackets."""
    parts, depth, start = [], 0, 0
    for pos, ch in enumerate(text):
        if ch == "[":
            depth += 1
        elif ch == "]":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:pos].strip())
            start = pos + 1
    tail = text[start:].strip()
    if tail or parts:
        parts.append(tail)
    if any(not p for p in parts):
        raise SyntaxProblem(f"empty operand in {text.strip()!r}")
    return parts


def parse_number(text: str) -> int:
    t = text.strip().lower().replace("_", "")
    try:
        if t.endswith("h") and re.fullmatch(r"[0-9][0-9a-f]*h", t):
            return int(t[:-1], 16)
        return int(t, 0) if t[:2] in ("0x", "0b", "0o") else int(t, 10)
    except ValueError:
        raise SyntaxProblem(f"bad number {text.strip()!r}") from None


def parse_operand(text: str) -> Operand:
    t = text.strip()
    if "{" in t:
        raise SyntaxProblem(f"{t!r}: T-SAR instructions take no opmask, zeroing or broadcast "
                            "({k1}, {z}, {1toN}): a LUT group and an accumulator tile are whole "
                            "registers (pad row tails with zero weights)")
    reg = _VECTOR_RE.match(t.lower())
    if reg:
        cls, num = reg.group(1), int(reg.group(2))
        if num >= 32:
            raise SyntaxProblem(f"no such register {t!r}")
        return Register(cls, num)
    if t.lower() in GPR_NUMBER:
        return Register("gpr", GPR_NUMBER[t.lower()])
    mem = _MEM_RE.match(t)
    if mem:
        return parse_memory(mem.group("size"), mem.group("addr"), t)
    if ":" in t and "[" in t:
        raise SyntaxProblem(f"segment overrides are not supported in T-SAR operands: {t!r}")
    raise SyntaxProblem(f"cannot parse operand {t!r} (expected a vector register or memory)")


def parse_memory(size_name: str | None, addr: str, whole: str) -> Memory:
    """Parse the inside of ``[...]``; ``size_name`` is the ``... ptr`` keyword or None."""
    size = None
    if size_name is not None:
        size = _SIZE_BY_NAME.get(size_name.lower())
        if size is None:
            raise SyntaxProblem(f"unknown size keyword {size_name!r} in {whole!r}")
    if not addr.strip():
        raise SyntaxProblem(f"empty address in {whole!r}")
    tokens = _TERM_SPLIT_RE.split(addr.strip())
    tokens = tokens[1:] if tokens[0] == "" else ["+", *tokens]  # every term gets a sign
    base: str | None = None
    index: str | None = None
    scale = 1
    disp = 0
    symbol: str | None = None
    for sign, term in zip(tokens[0::2], tokens[1::2], strict=True):
        term = term.strip()
        if not term:
            raise SyntaxProblem(f"missing term in address {whole!r}")
        low = term.lower()
        if "*" in term:
            a, b = (x.strip().lower() for x in term.split("*", 1))
            reg, factor = (a, b) if a in GPR_NUMBER else (b, a)
            if reg not in GPR_NUMBER:
                raise SyntaxProblem(f"scaled term {term!r} needs a 64-bit register in {whole!r}")
            if sign == "-" or index is not None:
                raise SyntaxProblem(f"bad index term {term!r} in {whole!r}")
            index, scale = reg, parse_number(factor)
            if scale not in (1, 2, 4, 8):
                raise SyntaxProblem(f"scale {scale} is not 1, 2, 4 or 8 in {whole!r}")
        elif low in GPR_NUMBER or low == "rip":
            if sign == "-":
                raise SyntaxProblem(f"a register cannot be subtracted in {whole!r}")
            if base is None:
                base = low
            elif index is None and low != "rip" and base != "rip":
                index = low
            else:
                raise SyntaxProblem(f"too many registers in address {whole!r}")
        elif term[0].isdigit():
            value = parse_number(term)
            disp += -value if sign == "-" else value
        elif _IDENT_RE.match(term) and not _VECTOR_RE.match(low):
            if symbol is not None or sign == "-":
                raise SyntaxProblem(f"only one added label is allowed in an address: {whole!r}")
            symbol = term
        else:
            raise SyntaxProblem(f"bad address term {term!r} in {whole!r}")
    if symbol is not None and base is None:
        base = "rip"  # [label] is RIP-relative in 64-bit code, as assemblers emit it by default
    return Memory(base=base, index=index, scale=scale, disp=disp, size=size, symbol=symbol)
