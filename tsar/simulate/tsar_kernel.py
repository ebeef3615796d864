"""Run the T-SAR BitLinear kernels in the functional simulator and check them bit for bit.

A kernel is named ``tsar-<config>-<flow>`` (e.g. ``tsar-c2s4-op``); see
:mod:`tsar.kernels.tsar_plan` for the dataflows and :mod:`tsar.kernels.tsar_codegen` for the
calling convention. The reference is :func:`tsar.kernels.reference.bitlinear`, which quantizes,
multiplies exactly in integers and dequantizes with the same float32 operations as the kernels, so
the float outputs must be identical bit for bit (and since ``|acc| < 2^24`` every int32 sum maps to
a distinct float32, equal floats imply equal integer sums).
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass

import numpy as np

from tsar.errors import UserError
from tsar.frames import Tabular
from tsar.isa.assembler import Program, assemble
from tsar.kernels import reference
from tsar.kernels.formats.tsar import pack_weights
from tsar.kernels.tsar_codegen import function_name, generate
from tsar.kernels.tsar_plan import KernelPlan, kernel_names, make_plan, parse_kernel_name
from tsar.sim import Machine, Stats, call_options, create_machine

KERNEL_NAMES = kernel_names()
"""The kernels of the configurations registered with the package (a variant registered later is
accepted by :func:`plan_for` too)."""


def plan_for(kernel: str, M: int, K: int, tile_block: int = 0) -> KernelPlan:
    """The plan of kernel ``tsar-<config>-<flow>`` for an ``M x K`` layer (UserError if invalid;
    ``tile_block``: :attr:`KernelPlan.tile_block`)."""
    try:
        cfg, flow = parse_kernel_name(kernel)
    except ValueError as exc:
        raise UserError(f"unknown T-SAR kernel {kernel!r}: {exc} (choose from "
                        f"{', '.join(kernel_names())})") from None
    try:
        return make_plan(cfg, flow, M, K, tile_block)
    except ValueError as exc:
        raise UserError(str(exc)) from None


@dataclass
class KernelRun(Tabular):
    """One simulated call: outputs, the reference, and the simulator's statistics."""

    plan: KernelPlan
    tokens: int
    y: np.ndarray  # (N, M) float32
    reference: np.ndarray  # (N, M) float32
    stats: Stats
    code_address: int  # guest address the kernel's code was loaded at (for stats.per_address)

    @property
    def exact(self) -> bool:
        """Bitwise equality of the float32 outputs with the reference."""
        return self.y.shape == self.reference.shape and np.array_equal(
            self.y.view(np.uint32), self.reference.view(np.uint32))

    @property
    def mismatches(self) -> int:
        return int(np.count_nonzero(self.y.view(np.uint32) != self.reference.view(np.uint32)))

    def records(self) -> list[dict]:
        """One row: the kernel, the shape, exactness and the run's counts (either engine)."""
        from tsar.jsonout import stats_fields

        counts = {k: v for k, v in stats_fields(self.stats).items()
                  if not isinstance(v, dict | list)}
        return [{"kernel": self.plan.name, "N": self.tokens, "M": self.plan.M, "K": self.plan.K,
                 "exact": self.exact, "mismatches": self.mismatches, **counts}]


_PROGRAMS: dict[tuple[KernelPlan, tuple[int, ...] | None], Program] = {}


def program_for(plan: KernelPlan, loops: tuple[int, ...] | None = None) -> Program:
    """The assembled kernel (cached per plan); ``loops``: its counted loops in these forms
    (:func:`tsar.kernels.tsar_codegen.generate`; ValueError where the plan cannot take them)."""
    key = (plan, loops)
    if key not in _PROGRAMS:
        _PROGRAMS[key] = assemble(generate(plan, loops=loops), filename=f"{plan.name}.s")
    return _PROGRAMS[key]


_LOADED: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def loaded_symbols(machine: Machine, program: Program, *, alone: bool = False) -> dict[str, int]:
    """``program``'s labels on ``machine``, loading it the first time only (a machine that runs a
    kernel again reuses its decoded and compiled code). ``alone``: ``program`` becomes the Python
    machine's only code, loaded over what it held (:meth:`PythonMachine.replace_program`, which keeps
    the compiled instructions the two programs share)."""
    loaded = _LOADED.setdefault(machine, {})
    if id(program) not in loaded:
        if alone:
            symbols = machine.replace_program(program)
            loaded.clear()
        else:
            symbols = machine.load_program(program)
        loaded[id(program)] = (program, symbols)
    return loaded[id(program)][1]


def simulate(plan: KernelPlan, x: np.ndarray, w_t: np.ndarray, w_scale: float, *,
             stream: np.ndarray | None = None, machine: Machine | None = None,
             memory_stats: bool | None = None, workspace: np.ndarray | None = None,
             loops: tuple[int, ...] | None = None) -> KernelRun:
    """Simulate ``y = BitLinear(x)`` with the plan's kernel.

    ``x``: float32 ``(N, K)``; ``w_t``: ternary int8 ``(M, K)``; ``w_scale``: the per-tensor weight
    scale; ``stream``: the packed weights if already packed (else packed here); ``workspace``: the
    workspace's bytes on entry (uint8 ``(plan.workspace_bytes,)``, default zeros: the kernel must
    not depend on them, padding included). ``memory_stats``: count scalar memory traffic too
    (default: where the engine can, i.e. the Python engine). ``loops``: run the kernel generated
    with its counted loops in these forms (:func:`program_for`).
    """
    x = np.ascontiguousarray(x, dtype=np.float32)
    if x.ndim != 2 or x.shape[1] != plan.K:
        raise UserError(f"{plan.name}: activations must be (N, {plan.K}) float32, got {x.shape}")
    if stream is None:
        stream = pack_weights(plan, w_t)
    machine = machine or create_machine()
    program = program_for(plan, loops)
    symbols = loaded_symbols(machine, program)
    n = x.shape[0]
    y = np.zeros((n, plan.M), np.float32)
    if workspace is None:
        workspace = np.zeros(plan.workspace_bytes, np.uint8)
    elif workspace.shape != (plan.workspace_bytes,) or workspace.dtype != np.uint8:
        raise UserError(f"{plan.name}: the workspace must be uint8 ({plan.workspace_bytes},), got "
                        f"{workspace.dtype} {workspace.shape}")
    scale = np.array([w_scale], np.float32)
    entry = symbols[function_name(plan)]
    if memory_stats is None:
        memory_stats = "memory_stats" in call_options(machine.engine)
    options = {"memory_stats": True} if memory_stats else {}
    machine.call(entry, x, stream, y, n, workspace, scale, returns="none", **options)
    ref = reference.bitlinear(x, w_t, float(scale[0]))
    return KernelRun(plan, n, y, ref, machine.stats, entry - program.symbols[function_name(plan)])
