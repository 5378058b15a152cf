"""Run the ``>>>`` examples in the package's docstrings (docs/contributing.md, "Style")."""

from __future__ import annotations

import doctest
import importlib
import importlib.util
import pkgutil
import re
from pathlib import Path

import pytest

PROMPT = re.compile(r"^\s*>>> ", re.MULTILINE)
"""A doctest prompt opens a line; a BF string such as ``">>>"`` inside code does not."""
PACKAGES = ("synthenv", "synthenv.compilers", "synthenv.tasks", "synthenv.agents")


def _modules() -> list[str]:
    names = list(PACKAGES)
    for package in PACKAGES:  # compilers/, tasks/, agents/ live beside synthenv/ in the repo
        path = importlib.import_module(package).__path__
        for info in pkgutil.walk_packages(path, prefix=package + "."):
            if info.name == "synthenv.__main__":
                continue  # runs the command line when imported
            if info.name.split(".")[1] in ("compilers", "tasks", "agents") and package == "synthenv":
                continue
            names.append(info.name)
    return sorted(name for name in set(names) if PROMPT.search(Path(importlib.util.find_spec(name).origin).read_text()))


@pytest.mark.parametrize("name", _modules())
def test_docstring_examples(name):
    """Only modules with examples are collected; each runs at least one, and none fails."""
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has '>>>' but doctest found no example in its docstrings"
    assert result.failed == 0, f"{result.failed} doctest(s) failed in {name}"
