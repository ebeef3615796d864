"""The Python engine's fast closures (data movements as derived byte maps, lane moves into GPRs,
fused memory operands) agree with the generic evaluation of the same op definitions, on every
form they apply to, with and without live bits 511:256. No host CPU is needed: the generic
closures are the ones checked against silicon by the differential tests."""

from __future__ import annotations

import numpy as np
import pytest

from tsar.sim.memory import GuestMemory
from tsar.sim.python_engine.blocks import compile_one
from tsar.sim.x86.decode import MNEMONIC_NAMES
from tsar.sim.x86.evexops import ALIASES
from tsar.sim.x86.forms import Form, all_forms
from tsar.sim.x86.permute import MOVEMENT_PREFIXES, byte_map
from tsar.sim.x86.state import CpuState
from tsar.sim.x86.vecops import OPS

LANE_MOVES = ("vmovd", "vmovq", "vpextrb", "vpextrw", "vpextrd", "vpextrq")
RDX = 2  # the memory operands' base register in Form.encodings


def _applies(form: Form) -> bool:
    name = ALIASES.get(form.mnemonic, form.mnemonic)
    return name.startswith(MOVEMENT_PREFIXES + LANE_MOVES) and form.vsib is None


FORMS = [f for f in all_forms() if _applies(f)]


def _run(code: bytes, trace: bool, wide: bool, seed: int) -> tuple[np.ndarray, list[int], bytes]:
    mem = GuestMemory(code_size=4096, data_size=1 << 16, stack_size=4096)
    st = CpuState(mem)
    if wide:
        st.widen()
    mem.write(mem.code_start, code, code=True)
    insn = compile_one(st, mem.code_start, trace=trace)
    assert insn.run is not None, insn.text
    rng = np.random.default_rng(seed)
    st.zmm[:] = rng.integers(0, 256, st.zmm.shape, dtype=np.uint8)
    st.gpr[:] = [int(v) for v in rng.integers(0, 1 << 63, len(st.gpr), dtype=np.int64)]
    window = mem.data_start + 1024
    st.gpr[RDX] = window
    mem.buf[1024 + mem.data_start - mem.base - 512:][:2048] = rng.integers(0, 256, 2048, dtype=np.uint8)
    if trace:
        st.trace = []
    insn.run()
    return st.zmm.copy(), list(st.gpr), mem.buf[mem.data_start - mem.base:][:4096].tobytes()


@pytest.mark.parametrize("form", FORMS, ids=lambda f: f.name)
def test_fast_closure_equals_generic(form: Form) -> None:
    encodings = list(dict.fromkeys(form.encodings(imms=(0x00, 0x1B, 0x4E, 0xB1, 0xFF), disps=(64,))))
    for i, code in enumerate(encodings):
        for wide in (False, True):
            fast, generic = _run(code, False, wide, i), _run(code, True, wide, i)
            text = f"{form.name} {code.hex()} wide={wide}"
            assert np.array_equal(fast[0], generic[0]), text
            assert fast[1] == generic[1], text
            assert fast[2] == generic[2], text


def test_byte_map_of_a_shuffle_and_of_arithmetic() -> None:
    """vpshufd's map is its dword selection; an add (consistent under relabelling of a single
    labelling pair, as any linear op is) is refused, since the two labellings are random."""
    got = byte_map(OPS["vpshufd"].fn, 0x1B, [16], 16)
    want = np.concatenate([np.arange(4 * d, 4 * d + 4) for d in (3, 2, 1, 0)])
    assert np.array_equal(got, want)
    assert byte_map(OPS["vpaddb"].fn, None, [16, 16], 16) is None
    zeros = byte_map(OPS["vpsrldq"].fn, 4, [16], 16)
    assert np.array_equal(zeros, np.r_[np.arange(4, 16), [-1] * 4])


def test_lane_move_names_exist() -> None:
    assert set(LANE_MOVES) <= set(MNEMONIC_NAMES.values())
