"""Operand values of decoded/parsed instructions: registers and x86-64 memory references."""

from __future__ import annotations

from dataclasses import dataclass

GPR64 = ("rax", "rcx", "rdx", "rbx", "rsp", "rbp", "rsi", "rdi",
         "r8", "r9", "r10", "r11", "r12", "r13", "r14", "r15")
"""64-bit general registers in encoding order."""

GPR_NUMBER = {name: num for num, name in enumerate(GPR64)}


@dataclass(frozen=True)
class Register:
    """A register, e.g. ``Register("ymm", 8)``; class ``"gpr"`` names a 64-bit GPR by number."""

    cls: str
    num: int

    @property
    def name(self) -> str:
        return GPR64[self.num] if self.cls == "gpr" else f"{self.cls}{self.num}"

    def __str__(self) -> str:
        return self.name


@dataclass(frozen=True)
class Memory:
    """An x86-64 memory reference ``[base + index*scale + disp]``.

    ``base`` is a 64-bit GPR name, ``"rip"`` for RIP-relative addressing, or None. ``disp`` is the
    encoded displacement (for RIP-relative: relative to the end of the instruction). ``symbol``
    names a label whose address fixes ``disp`` at assembly time (RIP-relative only); ``size`` is the
    access size in bytes from the ``... ptr`` keyword, or None when the text did not give one.
    """

    base: str | None = None
    index: str | None = None
    scale: int = 1
    disp: int = 0
    size: int | None = None
    symbol: str | None = None

    @property
    def rip_relative(self) -> bool:
        return self.base == "rip"

    def address_text(self) -> str:
        """The bracketed address, formatted like iced-x86's Intel syntax (``[rsi+rax*4+0x10]``)."""
        parts: list[str] = []
        if self.base:
            parts.append(self.base)
        if self.index:
            parts.append(self.index if self.scale == 1 else f"{self.index}*{self.scale}")
        text = "+".join(parts)
        if self.symbol is not None:
            text += f"+{self.symbol}" if text else self.symbol
        elif self.disp or not text:
            sign = "-" if self.disp < 0 else ("+" if text else "")
            text += f"{sign}{abs(self.disp):#x}"
        return f"[{text}]"

    def text(self, size_names: dict[int, str]) -> str:
        prefix = f"{size_names[self.size]} ptr " if self.size in size_names else ""
        return prefix + self.address_text()


Operand = Register | Memory
