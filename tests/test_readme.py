"""The README's Python tour runs as written."""

import re
from pathlib import Path

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)
    assert blocks
    for block in blocks:
        exec(compile(block, "README.md", "exec"), {})


def test_readme_has_exactly_the_two_setup_commands() -> None:
    text = README.read_text()
    assert "pip install -e . && tsar demo" in text
    assert 'pip install -e ".[test]" && python -m pytest' in text
