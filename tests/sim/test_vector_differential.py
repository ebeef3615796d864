"""The vector layer against the host CPU, bit for bit, for every supported instruction form.

Each form (register / memory / xmm / ymm / immediate variants of each mnemonic) runs natively on
thousands of random and edge-value register+memory states (in a child process) and in the
simulator's compiled closure; registers, memory, GPRs and the arithmetic flags must agree.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest
from sim_forms import forms
from sim_inputs import make_records

from tsar.isa.assembler import keystone_code
from tsar.sim import run_on_host, simulate_records, supported_mnemonics
from tsar.sim.host_oracle import FLAGS_MASK, FLAGS_OUT

FORMS = forms()
FAST_CASES = 320
SLOW_CASES = 2000


def _assemble(text: str) -> bytes:
    return keystone_code(text, 0)


def _compare(text: str, native: np.ndarray, sim: np.ndarray) -> None:
    for arr in (native, sim):
        flags = arr[:, FLAGS_OUT:FLAGS_OUT + 8].view(np.uint64)
        flags &= np.uint64(FLAGS_MASK)
    bad = np.flatnonzero((native != sim).any(axis=1))
    if bad.size:
        i = bad[0]
        cols = np.flatnonzero(native[i] != sim[i])
        raise AssertionError(f"{text}: {bad.size} of {len(native)} cases differ; first case {i}, "
                             f"byte offsets {cols[:12].tolist()}: native {native[i, cols[:12]].tolist()} "
                             f"sim {sim[i, cols[:12]].tolist()}")


def _check_mnemonics(names: list[str], cases: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    jobs, texts = [], []
    for name in names:
        for text in FORMS[name]:
            jobs.append((_assemble(text), make_records(rng, cases)))
            texts.append(text)
    results = run_on_host(jobs)
    for text, (insn, records), native in zip(texts, jobs, results, strict=True):
        _compare(text, native, simulate_records(insn, records))


GROUPS: dict[str, list[str]] = {}
for _name in sorted(FORMS):
    GROUPS.setdefault(_name[:5], []).append(_name)


def test_forms_are_supported():
    """These hand-picked forms (edge immediates, aliasing) add to the iced-derived forms of
    test_forms_differential.py, which cover every supported form."""
    assert set(FORMS) <= set(supported_mnemonics())


@pytest.mark.native
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_vector_matches_host(group: str):
    _check_mnemonics(GROUPS[group], FAST_CASES, seed=zlib.crc32(group.encode()))


@pytest.mark.native
@pytest.mark.slow
@pytest.mark.parametrize("group", sorted(GROUPS))
def test_vector_matches_host_thorough(group: str):
    _check_mnemonics(GROUPS[group], SLOW_CASES, seed=1 + zlib.crc32(group.encode()))
