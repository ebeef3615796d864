"""Static rewriting of T-SAR instructions for native execution.

Every T-SAR instruction (at least :data:`MIN_SITE` bytes: prefix, opcode, ModRM; 5 in VEX3 form, 6
in EVEX form) is replaced by a ``jmp rel32`` to a stub generated for that site; the rest of its
bytes become ``int3``. The stub knows the instruction's registers (zmm0..31 in EVEX form) and
addressing statically. It steps over the red zone, saves RFLAGS and the caller-saved GPRs, computes
the memory operand's address from the guest's registers, stores the vector and opmask registers into
a register image (:mod:`tsar.sim.vector_spill`: zmm0..31 and k0..7 on a host with AVX-512, else
ymm0..15), calls the configuration's C helper (:mod:`.tsar_stubs`: the golden semantics on the
image), reloads the registers from the image, counts the execution, restores the GPRs and RFLAGS and
jumps back after the instruction. So every register and flag the instruction does not
architecturally write is preserved.

Helper signatures (System V): ``tlut(uint8_t *regs, int dst, int src_reg, const int8_t *act)``
and ``tgemv(uint8_t *regs, int dst, int lut, int src_reg, const uint8_t *weights)``; a register
operand passes its number and a null pointer, a memory operand -1 and the address.
"""

from __future__ import annotations

from dataclasses import dataclass

from tsar.isa import codec
from tsar.isa.assembler import keystone_code
from tsar.isa.instructions import Field, Kind
from tsar.isa.operands import Memory, Register
from tsar.sim.vector_spill import spill_lines

RED_ZONE = 128
SAVED_GPRS = ("rax", "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "rbx")
"""Pushed by every stub, in this order (the caller-saved GPRs, and rbx which the stub uses)."""
_PUSHED = RED_ZONE + 8 + 8 * len(SAVED_GPRS)  # bytes rsp moves before the address is computed
JMP_REL32 = 5
MIN_SITE = min(codec.PREFIX_BYTES.values()) + 2
"""Bytes of the shortest T-SAR instruction (prefix, opcode, ModRM): a ``jmp rel32`` must fit."""
INT3 = 0xCC
UD2 = b"\x0f\x0b"


@dataclass(frozen=True)
class Site:
    """One T-SAR instruction in loaded code: its address, length and decoded form."""

    address: int
    length: int
    inst: codec.TsarInstruction
    text: str

    @property
    def next(self) -> int:
        return self.address + self.length


def _address_setup(src: Register | Memory, next_ip: int) -> tuple[str, int]:
    """Instruction putting the operand's address in rbx (0 for a register operand), and the
    register number passed to the helper (-1 for memory)."""
    if isinstance(src, Register):
        return "xor ebx, ebx", src.num
    if src.rip_relative:
        return f"movabs rbx, {(next_ip + src.disp) & ((1 << 64) - 1):#x}", -1
    disp = src.disp + (_PUSHED if src.base == "rsp" else 0)
    parts = [p for p in (src.base, f"{src.index}*{src.scale}" if src.index else None) if p]
    if disp or not parts:
        parts.append(f"{disp:#x}" if disp >= 0 else f"-{-disp:#x}")
    return "lea rbx, [" + " + ".join(parts).replace("+ -", "- ") + "]", -1


def stub_text(site: Site, helper: int, image: int, counter: int, current: int) -> str:
    """Intel-syntax source of the stub for ``site`` (absolute addresses of its C helper, the
    register image, its execution counter, and the word naming the site whose helper runs, which
    lets a fault inside the helper be reported at the T-SAR instruction)."""
    inst = site.inst
    dst = inst.operand(Field.MODRM_REG).num
    setup, src_reg = _address_setup(inst.operand(Field.MODRM_RM), site.next)
    if inst.spec.kind is Kind.TLUT:
        args = [f"mov esi, {dst}", f"mov edx, {src_reg}", "mov rcx, rbx"]
    else:
        lut = inst.operand(Field.VEX_VVVV).num
        args = [f"mov esi, {dst}", f"mov edx, {lut}", f"mov ecx, {src_reg}", "mov r8, rbx"]
    save, restore = spill_lines("rax")
    lines = [
        f"lea rsp, [rsp - {RED_ZONE}]", "pushfq", *(f"push {r}" for r in SAVED_GPRS),
        setup,
        f"movabs rax, {image:#x}",
        *save,
        "mov rdi, rax", *args,
        f"movabs rax, {current:#x}", f"movabs r9, {site.address:#x}", "mov qword ptr [rax], r9",
        "mov rbx, rsp", "and rsp, -16", f"movabs rax, {helper:#x}", "call rax", "mov rsp, rbx",
        f"movabs rax, {current:#x}", "mov qword ptr [rax], 0",
        f"movabs rax, {image:#x}",
        *restore,
        f"movabs rax, {counter:#x}", "inc qword ptr [rax]",
        *(f"pop {r}" for r in reversed(SAVED_GPRS)), "popfq", f"lea rsp, [rsp + {RED_ZONE}]",
        f"jmp {site.next:#x}",
    ]
    return "\n".join(lines)


def assemble_stub(site: Site, at: int, helper: int, image: int, counter: int, current: int) -> bytes:
    """Machine code of the stub for ``site``, placed at address ``at``."""
    return keystone_code(stub_text(site, helper, image, counter, current), at)


def patch(site: Site, stub: int) -> bytes:
    """The bytes replacing the site: ``jmp stub`` then ``int3`` padding."""
    if site.length < JMP_REL32:
        raise ValueError(f"site {site.address:#x} ({site.length} bytes) cannot hold a jmp rel32")
    rel = stub - (site.address + JMP_REL32)
    if not -(1 << 31) <= rel < (1 << 31):
        raise ValueError(f"stub at {stub:#x} out of jmp rel32 range of site {site.address:#x}")
    return b"\xe9" + rel.to_bytes(4, "little", signed=True) + bytes([INT3]) * (site.length - JMP_REL32)


def refusal_patch(length: int) -> bytes:
    """The bytes replacing a system call of ``length`` bytes (at least 2): ``ud2``, then ``int3``
    padding; the worker's SIGILL there is reported as the system call."""
    return UD2 + bytes([INT3]) * (length - len(UD2))
