"""Model estimates and compare default to the kernels of the configurations registered at the call,
not at import: a variant registered later (``register_config``, ``--isa``) is among them."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

import tsar.compare as compare_mod
import tsar.estimate.model as model_eval
from tsar.isa.config import TsarConfig, configs, register_config, unregister_config


class _Seen(Exception):
    pass


@pytest.fixture()
def variant():
    slot = next(s for s in range(16) if s not in {cfg.slot for cfg in configs()})
    cfg = register_config(TsarConfig("c2s4-late", c=2, s=4, vector_bits=256, slot=slot,
                                     lut_layout="compact"))
    yield cfg
    unregister_config(cfg.name)


def _fakes(variant: TsarConfig, seen: list[str]):
    """A counts stand-in that records the kernel, and a timing stand-in that stops the run at the
    first kernel of ``variant`` (nothing is simulated)."""
    def counts(kernel: str, *args, **kwargs) -> SimpleNamespace:
        seen.append(kernel)
        return SimpleNamespace(weight_bytes=1, bytes_moved=1, tokens=1)

    def modelled(*args, **kwargs) -> tuple[float, str]:
        if seen and seen[-1].startswith(f"tsar-{variant.name}-"):
            raise _Seen
        return 1.0, "core"
    return counts, modelled


def test_evaluate_defaults_to_registered_kernels(variant, monkeypatch) -> None:
    seen: list[str] = []
    counts, modelled = _fakes(variant, seen)
    monkeypatch.setattr(model_eval, "simulated_counts", counts)
    monkeypatch.setattr(model_eval, "counts_for", counts)
    monkeypatch.setattr(model_eval, "modelled", modelled)
    monkeypatch.setattr(model_eval, "simulate_announced", lambda: None)  # (counts are faked)
    with pytest.raises(_Seen):
        model_eval.evaluate("bitnet-125m", "laptop")


def test_compare_defaults_to_registered_kernels(variant, monkeypatch) -> None:
    seen: list[str] = []
    counts, modelled = _fakes(variant, seen)
    monkeypatch.setattr(compare_mod, "counts_for", counts)
    monkeypatch.setattr(compare_mod, "modelled", modelled)
    monkeypatch.setattr(compare_mod, "simulate_announced", lambda: None)  # (counts are faked)
    with pytest.raises(_Seen):
        compare_mod.compare(1, 256, 256, "laptop")
