"""Which of the :mod:`tsar.sim.x86.forms` the execution layer supports: every encoding of a form must
compile (:func:`tsar.sim.python_engine.blocks.compile_one`) without an "unsupported" fault."""

from __future__ import annotations

from dataclasses import dataclass, field

from tsar.sim.memory import GuestMemory
from tsar.sim.python_engine.blocks import compile_one
from tsar.sim.x86.forms import ALL_EXTENSIONS, Form, all_forms
from tsar.sim.x86.state import CpuState


@dataclass
class ExtensionCoverage:
    """Supported forms of one extension; ``missing`` names the iced ``Code`` of each other form."""

    extension: str
    total: int = 0
    missing: list[str] = field(default_factory=list)

    @property
    def supported(self) -> int:
        return self.total - len(self.missing)

    @property
    def percent(self) -> float:
        return 100.0 * self.supported / self.total if self.total else 100.0


def form_supported(form: Form, st: CpuState, address: int) -> bool:
    for code in form.encodings():
        st.mem.write(address, code + b"\x90" * 15, code=True)
        insn = compile_one(st, address)
        if insn.error is not None or (insn.run is None and insn.branch is None):
            return False
    return True


def coverage() -> list[ExtensionCoverage]:
    """Coverage per extension of :data:`~tsar.sim.x86.forms.ALL_EXTENSIONS`, in that order (the
    VEX forms of :func:`~tsar.sim.x86.forms.vex_forms`, then the AVX-512-era forms of
    :func:`~tsar.sim.x86.forms.avx512_forms`)."""
    mem = GuestMemory(code_size=4096, data_size=4096, stack_size=4096)
    st = CpuState(mem)
    report = {ext: ExtensionCoverage(ext) for ext in ALL_EXTENSIONS}
    for form in all_forms():
        entry = report[form.extension]
        entry.total += 1
        if not form_supported(form, st, mem.code_start):
            entry.missing.append(form.name)
    return list(report.values())
