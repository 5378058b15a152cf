"""Comments and docstrings cite what a reader of the repository can open: one of its files
(``docs/semantics.md §2``) or the PQT paper and its code, never a document outside the repository.

The two documents that used to be cited are the PQT spec and the style guide, which are not in the
repository; ``docs/semantics.md`` and ``docs/contributing.md`` say what they said. The patterns are
assembled from pieces so that this file does not count as a citation itself.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
OUTSIDE = re.compile("PQT" + "_SPEC" + "|" + "STYLE" + " §")
"""A citation of a document outside the repository."""
SUFFIXES = {".py", ".c", ".h", ".cu", ".md"}
SKIPPED_DIRS = {"runs", "build", "dist", "__pycache__", "fixtures"}


def tree() -> list[Path]:
    """The repository's source and documentation files (no hidden folders, virtualenvs or run outputs)."""
    files = []
    for path in ROOT.rglob("*"):
        parts = path.relative_to(ROOT).parts
        if path.suffix in SUFFIXES and path.is_file() and not any(
                p.startswith(".") or p in SKIPPED_DIRS or p.endswith(".egg-info") for p in parts[:-1]):
            files.append(path)
    return sorted(files)


def citations(pattern: re.Pattern, files: list[Path]) -> list[str]:
    """``path:line: text`` of every line of ``files`` that matches ``pattern``."""
    return [f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{number}: {line.strip()}"
            for path in files for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1)
            if pattern.search(line)]


def test_nothing_cites_a_document_outside_the_repository():
    found = citations(OUTSIDE, tree())
    assert not found, "cite docs/semantics.md, docs/contributing.md or the PQT paper/code instead:\n" + "\n".join(found)


def test_the_check_sees_the_tree_and_would_catch_a_citation(tmp_path):
    files = {p.relative_to(ROOT).as_posix() for p in tree()}
    assert {"synthenv/reference.py", "synthenv/scoring.c", "compilers/traditional.py", "agents/search/agent.py",
            "tasks/pqt.py", "synthenv/env/vector.py", "README.md", "docs/semantics.md",
            "tests/test_citations.py"} <= files
    assert not any(f.startswith(".venv/") for f in files)
    planted = tmp_path / "x.py"
    planted.write_text("# see " + "PQT" + "_SPEC §1\n")
    assert citations(OUTSIDE, [planted]) and not citations(OUTSIDE, [ROOT / "tests" / "test_citations.py"])


SECTION = re.compile(r"docs/([\w-]+\.md) §(\d+)")


@pytest.mark.parametrize("path", [p for p in tree() if SECTION.search(p.read_text(errors="replace"))],
                         ids=lambda p: p.relative_to(ROOT).as_posix())
def test_cited_sections_exist(path):
    """``docs/semantics.md §2`` must name a page of docs/ that has a section ``## 2.``."""
    for page, number in SECTION.findall(path.read_text(errors="replace")):
        target = ROOT / "docs" / page
        assert target.is_file(), f"{path.relative_to(ROOT)} cites docs/{page}, which does not exist"
        assert re.search(rf"^## {number}\. ", target.read_text(), re.M), f"docs/{page} has no section {number}"
