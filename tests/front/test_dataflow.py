"""Dataflow selection ranks the simulated kernels by their estimated cycles."""

from tsar.dataflow import select
from tsar.kernel_sim import KERNEL_NAMES


def test_selection_ranks_every_kernel() -> None:
    sel = select(64, 256)
    assert {c.kernel for c in sel.candidates} == set(KERNEL_NAMES)
    best = sel.best
    assert all(best.cycles <= c.cycles for c in sel.candidates)
    assert "<- selected" in sel.table() and best.kernel in sel.table()
    by_name = {c.kernel: c for c in sel.candidates}
    # AP-max builds each LUT once like AP-min but touches the partial sums G times less often
    assert by_name["tsar-c2s4-ap-max"].vector_bytes < by_name["tsar-c2s4-ap-min"].vector_bytes
    # OP keeps accumulators in registers: the least memory traffic, but TLUTs are rebuilt per pass
    assert by_name["tsar-c2s4-op"].vector_bytes <= by_name["tsar-c2s4-ap-max"].vector_bytes
    assert by_name["tsar-c2s4-op"].tsar_uops >= by_name["tsar-c2s4-ap-min"].tsar_uops


def test_selection_scales_with_tokens() -> None:
    one = select(32, 64, N=1, kernels=("tsar-c2s4-op",))
    many = select(32, 64, N=8, kernels=("tsar-c2s4-op",))
    assert many.best.cycles == one.best.cycles  # per token
    assert f"{one.best.cycles * 8:,.0f}" in many.table()
