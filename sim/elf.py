"""A small ELF64 (x86-64) shared-object loader for freestanding kernels.

Reads PT_LOAD segments into one image, the symbols of ``.dynsym`` and ``.symtab``, and applies
``R_X86_64_RELATIVE`` / ``R_X86_64_64`` / ``GLOB_DAT`` / ``JUMP_SLOT`` relocations against symbols
the object defines itself. A relocation against an undefined symbol (a libc call) is an error:
kernels must be built with ``-nostdlib`` and call nothing outside themselves.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from tsar.sim.errors import SimulationError

PT_LOAD, SHT_SYMTAB, SHT_RELA, SHT_DYNSYM = 1, 2, 4, 11
SHF_EXECINSTR = 0x4
STT_OBJECT, STT_FUNC, SHN_LORESERVE = 1, 2, 0xFF00
R_X86_64_64, R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT, R_X86_64_RELATIVE = 1, 6, 7, 8


@dataclass
class ElfImage:
    """The object's memory image at offset 0 (``size`` bytes), symbols as image offsets,
    executable section ranges and pending relocations ``(offset, kind, symbol offset, addend)``."""

    image: bytearray
    symbols: dict[str, int]
    exec_ranges: list[tuple[int, int]]
    relocations: list[tuple[int, int, int, int]] = field(default_factory=list)

    @property
    def size(self) -> int:
        return len(self.image)

    def relocated(self, base: int) -> bytes:
        """The image with every relocation applied for load address ``base``."""
        out = bytearray(self.image)
        for offset, kind, sym, addend in self.relocations:
            value = base + addend if kind == R_X86_64_RELATIVE else base + sym + addend
            out[offset:offset + 8] = (value & ((1 << 64) - 1)).to_bytes(8, "little")
        return bytes(out)


def _err(name: str, message: str) -> SimulationError:
    return SimulationError("elf", f"{name}: {message}")


MAX_IMAGE = 1 << 32
"""Largest memory image a shared object may span (its PT_LOAD segments)."""


def load_elf_image(data: bytes, name: str = "<elf>") -> ElfImage:
    """Parse a shared object; a file that is not one, or is truncated or malformed, is a
    :class:`SimulationError` naming it."""
    if data[:4] != b"\x7fELF" or data[4:6] != b"\x02\x01":
        raise _err(name, "not a little-endian ELF64 file")
    try:
        return _parse_elf(data, name)
    except (struct.error, IndexError, ValueError, OverflowError):
        raise _err(name, "truncated or malformed ELF file (a header, table or string lies past its "
                         "end)") from None


def _parse_elf(data: bytes, name: str) -> ElfImage:
    (e_type, e_machine, _, _, e_phoff, e_shoff, _, _, e_phentsize, e_phnum, e_shentsize, e_shnum,
     _) = struct.unpack_from("<HHIQQQIHHHHHH", data, 16)
    if e_machine != 62:
        raise _err(name, f"machine {e_machine} is not x86-64")
    if e_type != 3:
        raise _err(name, "not a shared object (build with -shared -fPIC)")
    loads = []
    for i in range(e_phnum):
        p_type, _, p_offset, p_vaddr, _, p_filesz, p_memsz, _ = struct.unpack_from(
            "<IIQQQQQQ", data, e_phoff + i * e_phentsize)
        if p_type == PT_LOAD:
            loads.append((p_offset, p_vaddr, p_filesz, p_memsz))
    if not loads:
        raise _err(name, "no PT_LOAD segments")
    size = max(v + m for _, v, _, m in loads)
    if size > MAX_IMAGE or any(o + f > len(data) for o, _, f, _ in loads):
        raise _err(name, "truncated or malformed ELF file (PT_LOAD segments outside the file or "
                         f"spanning {size:,} bytes)")
    image = bytearray((size + 4095) // 4096 * 4096)
    for offset, vaddr, filesz, _ in loads:
        image[vaddr:vaddr + filesz] = data[offset:offset + filesz]

    sections = [struct.unpack_from("<IIQQQQIIQQ", data, e_shoff + i * e_shentsize)
                for i in range(e_shnum)]
    symbols: dict[str, int] = {}
    exec_ranges = []
    dynsyms: list[tuple[str, int, int]] = []
    for _, sh_type, sh_flags, sh_addr, sh_offset, sh_size, sh_link, _, _, sh_entsize in sections:
        if sh_flags & SHF_EXECINSTR and sh_addr:
            exec_ranges.append((sh_addr, sh_addr + sh_size))
        if sh_type in (SHT_SYMTAB, SHT_DYNSYM):
            strtab = sections[sh_link]
            syms = _symbols(data, sh_offset, sh_size, sh_entsize or 24, strtab[4])
            if sh_type == SHT_DYNSYM:
                dynsyms = syms
            for sym_name, value, shndx in syms:
                if sym_name and shndx != 0 and value:
                    symbols.setdefault(sym_name, value)
    relocations = []
    for _, sh_type, _, _, sh_offset, sh_size, _, _, _, sh_entsize in sections:
        if sh_type != SHT_RELA:
            continue
        for off in range(sh_offset, sh_offset + sh_size, sh_entsize or 24):
            r_offset, r_info, r_addend = struct.unpack_from("<QQq", data, off)
            kind, sym_index = r_info & 0xFFFFFFFF, r_info >> 32
            if kind == R_X86_64_RELATIVE:
                relocations.append((r_offset, kind, 0, r_addend))
            elif kind in (R_X86_64_64, R_X86_64_GLOB_DAT, R_X86_64_JUMP_SLOT):
                sym_name, value, shndx = dynsyms[sym_index] if sym_index < len(dynsyms) else ("?", 0, 0)
                if shndx == 0:
                    raise _err(name, f"needs external symbol {sym_name!r}; kernels must not call libc "
                                     "(build with -nostdlib and avoid library calls)")
                addend = r_addend if kind == R_X86_64_64 else 0
                relocations.append((r_offset, kind, value, addend))
            elif kind != 0:
                raise _err(name, f"unsupported relocation type {kind} at {r_offset:#x}")
    return ElfImage(image, symbols, exec_ranges, relocations)


def _symbols(data: bytes, offset: int, size: int, entsize: int, str_offset: int
             ) -> list[tuple[str, int, int]]:
    out = []
    for off in range(offset, offset + size, entsize):
        st_name, st_info, _, st_shndx, st_value, _ = struct.unpack_from("<IBBHQQ", data, off)
        if st_info & 0xF not in (STT_OBJECT, STT_FUNC) or st_shndx >= SHN_LORESERVE:
            st_shndx = 0  # not a function or object of the image (e.g. an absolute asm symbol)
        end = data.index(b"\0", str_offset + st_name)
        out.append((data[str_offset + st_name:end].decode(errors="replace"), st_value, st_shndx))
    return out
