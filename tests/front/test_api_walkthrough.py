"""docs/api.md runs as written: its Python blocks are executed in order in one namespace."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"


@pytest.mark.native
def test_walkthrough_runs():
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)
    assert len(blocks) >= 5
    namespace: dict = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{DOC.name} block {i + 1}", "exec"), namespace)
    assert namespace["run"].exact


def test_tables_render_without_pandas_too():
    from tsar.simulate.model import ModelRun

    run = ModelRun(tokens=2)
    run.seconds["qkv"], run.calls["qkv"], run.kernels["qkv"] = 0.004, 2, "tsar-c2s4-op"
    assert run.records() == [{"matrix": "qkv", "kernel": "tsar-c2s4-op", "calls": 2, "seconds": 0.004,
                              "ms_per_call": 2.0, "ms_per_token": 2.0}]
    assert "<td>tsar-c2s4-op</td>" in run._repr_html_()
