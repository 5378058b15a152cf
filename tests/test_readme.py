"""README's Python examples run as written (each block on its own, in a fresh namespace)."""

from __future__ import annotations

import re
from pathlib import Path

import gymnasium
import pytest

from synthenv import tasks
from synthenv.env import env_id

README = Path(__file__).resolve().parents[1] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)


def test_the_readme_has_python_examples():
    assert len(BLOCKS) >= 4


@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_python_block_runs(index):
    before = set(tasks.names("user"))
    try:
        exec(compile(BLOCKS[index], f"README.md python block {index}", "exec"), {"__name__": "readme"})
    finally:  # an example that registers a task must not leak it into other tests
        for name in set(tasks.names("user")) - before:
            tasks.unregister(name)
            gymnasium.registry.pop(env_id(name), None)
