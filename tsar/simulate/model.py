"""``tsar run model NAME``: every BitLinear layer of a model through T-SAR kernels, checked.

Each transformer layer's matrices (qkv, o, gate, up, down at the model's real shapes) get ternary
weights (random, seeded per layer and matrix, or from a ``.npz``) and random float32 activations
for ``N`` tokens; the kernel's float output must equal :func:`tsar.kernels.reference.bitlinear`
bit for bit. With the native engine a whole model runs in seconds to minutes; the Python engine
takes far longer (use ``--layers``).

Weights file (``--weights FILE.npz``): arrays named ``"{layer}.{matrix}"`` (e.g. ``"0.qkv"``), int8
``(M, K)`` in {-1, 0, +1}, optionally with a float32 scalar ``"{layer}.{matrix}.scale"``
(default 1.0). Missing arrays are random.
"""

from __future__ import annotations

import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from tsar import console
from tsar.common.files import load_arrays
from tsar.errors import UserError
from tsar.frames import Tabular
from tsar.kernels import reference
from tsar.kernels.formats.tsar import pack_weights
from tsar.kernels.tsar_codegen import function_name
from tsar.kernels.tsar_plan import KernelPlan
from tsar.models import LinearShape, get_model
from tsar.sim import create_machine
from tsar.simulate.tsar_kernel import plan_for, program_for


@dataclass
class ModelRun(Tabular):
    """Kernel seconds and calls per matrix kind, and the number of inexact outputs."""

    tokens: int
    seconds: dict[str, float] = field(default_factory=lambda: defaultdict(float))
    calls: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    kernels: dict[str, str] = field(default_factory=dict)
    mismatched_layers: list[str] = field(default_factory=list)

    @property
    def total_seconds(self) -> float:
        return sum(self.seconds.values())

    def records(self) -> list[dict]:
        return [{"matrix": name, "kernel": self.kernels[name], "calls": self.calls[name],
                 "seconds": secs, "ms_per_call": secs / self.calls[name] * 1e3,
                 "ms_per_token": secs / self.tokens * 1e3} for name, secs in self.seconds.items()]

    def table(self) -> str:
        rows = [f"{'matrix':<6} {'kernel':<20} {'calls':>5} {'ms/call':>9} {'ms/token':>9}"]
        for name, secs in self.seconds.items():
            calls = self.calls[name]
            rows.append(f"{name:<6} {self.kernels[name]:<20} {calls:>5} {secs / calls * 1e3:>9.3f} "
                        f"{secs / self.tokens * 1e3:>9.3f}")
        rows.append(f"{'all':<6} {'':<20} {sum(self.calls.values()):>5} {'':>9} "
                    f"{self.total_seconds / self.tokens * 1e3:>9.3f}")
        return "\n".join(rows)


def _kernel_for(shape: LinearShape, kernel: str) -> KernelPlan:
    if kernel != "auto":
        return plan_for(kernel, shape.m, shape.k)
    from tsar.estimate.dataflow import select

    return plan_for(select(shape.m, shape.k, shape.n).best.kernel, shape.m, shape.k)


def _kernels_for(shapes: tuple[LinearShape, ...], kernel: str) -> dict[str, KernelPlan]:
    """Each matrix's plan; with ``auto``, every shape's candidates are simulated in one go."""
    if kernel != "auto":
        return {s.name: _kernel_for(s, kernel) for s in shapes}
    from tsar.estimate.dataflow import candidates
    from tsar.estimate.layer import counts_request
    from tsar.simulate.counts import announced

    with announced([counts_request(k, s.n, s.m, s.k) for s in shapes for k in candidates()]):
        return {s.name: _kernel_for(s, kernel) for s in shapes}


def _weights(store: dict[str, np.ndarray], key: str, shape: LinearShape,
             rng: np.random.Generator) -> tuple[np.ndarray, float]:
    if key in store:
        w = np.asarray(store[key])
        if w.shape != (shape.m, shape.k) or not np.isin(w, (-1, 0, 1)).all():
            raise UserError(f"weights '{key}' must be ternary int8 of shape {(shape.m, shape.k)}, "
                            f"got {w.dtype} {w.shape}")
        scale = float(np.asarray(store.get(f"{key}.scale", 1.0)))
        return w.astype(np.int8), scale
    return rng.integers(-1, 2, (shape.m, shape.k)).astype(np.int8), 1.0


def run_model(name: str, tokens: int = 1, *, kernel: str = "auto", engine: str = "native",
              weights: str | None = None, layers: int | None = None, seed: int = 0,
              progress: bool = True) -> ModelRun:
    """Run the model's BitLinear layers (all, or the first ``layers``) for ``tokens`` tokens."""
    try:
        model = get_model(name)
    except KeyError as exc:
        raise UserError(str(exc.args[0])) from None
    if tokens < 1:
        raise UserError(f"--tokens must be at least 1, got {tokens}")
    count = model.layers if layers is None else min(layers, model.layers)
    store: dict[str, np.ndarray] = {}
    if weights:
        path = Path(weights)
        if not path.is_file():
            raise UserError(f"no weights file {path}")
        loaded = load_arrays(path, "a weights archive (.npz)")
        if not isinstance(loaded, dict):
            raise UserError(f"{path}: not a weights archive (.npz): a single array")
        store = loaded
    shapes = model.layer_shapes(tokens)
    for layer in range(count):  # a bad weights file fails before any kernel is chosen or run
        for shape in shapes:
            if f"{layer}.{shape.name}" in store:
                _weights(store, f"{layer}.{shape.name}", shape, np.random.default_rng(0))
    plans = _kernels_for(shapes, kernel)
    machine = create_machine(engine)
    entries = {n: machine.load_program(program_for(p))[function_name(p)] for n, p in plans.items()}
    run = ModelRun(tokens, kernels={n: p.name for n, p in plans.items()})
    started = time.perf_counter()
    for layer in range(count):
        rng = np.random.default_rng((seed, layer))
        for shape in shapes:
            plan = plans[shape.name]
            w_t, w_scale = _weights(store, f"{layer}.{shape.name}", shape, rng)
            x = rng.standard_normal((tokens, shape.k)).astype(np.float32)
            y = np.zeros((tokens, shape.m), np.float32)
            workspace = np.zeros(plan.workspace_bytes, np.uint8)
            scale = np.array([w_scale], np.float32)
            machine.call(entries[shape.name], x, pack_weights(plan, w_t), y, tokens, workspace,
                         scale, returns="none")
            run.seconds[shape.name] += machine.stats.wall_seconds
            run.calls[shape.name] += 1
            want = reference.bitlinear(x, w_t, w_scale)
            if not np.array_equal(y.view(np.uint32), want.view(np.uint32)):
                run.mismatched_layers.append(f"{layer}.{shape.name}")
        if progress:
            elapsed = time.perf_counter() - started
            eta = elapsed / (layer + 1) * (count - layer - 1)
            console.progress(f"\r{model.name}: layer {layer + 1}/{count}  {elapsed:.0f} s elapsed, "
                             f"~{eta:.0f} s left", end="")
    if progress:
        console.progress("")
    return run
