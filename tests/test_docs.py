"""The user docs state the present: README.md and BENCHMARKS.md carry no commit hashes, no times of day and no
words about how the work was done, and stay short. History belongs to git and CHANGELOG.md."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent
DOCS = ("README.md", "BENCHMARKS.md")
MAX_LINES = {"README.md": 260, "BENCHMARKS.md": 600}
"""Room for a section more than the docs hold today (about 200 and 500 lines), not for a lab notebook."""

HEX = re.compile(r"\b[0-9a-f]{7,40}\b")
"""A commit-hash-like token: 7-40 lowercase hex digits standing alone. A longer run of hex (a sha256 digest) has
no word boundary within 40 characters, so it does not match; neither doc has one."""
TIME_OF_DAY = re.compile(r"(?<![\[\w:])\d{1,2}:\d{2}\b")
"""A clock time such as 14:38 (a slice like ``[1:10]`` or a ratio like 1:2 is not one)."""
PROCESS_WORDS = ("this session", "this work", "issue ", "before this", "lent to", "helper", "we tried", "todo",
                 "placeholder", "filled in from this run")
"""Words about how the work was done, or about work still to do (matched case-insensitively)."""


def _lines(name: str) -> list[tuple[int, str]]:
    return list(enumerate((ROOT / name).read_text(encoding="utf-8").splitlines(), start=1))


def _report(name: str, hits: list[tuple[int, str, str]]) -> str:
    shown = "\n".join(f"  {name}:{number}: {found!r} in: {line.strip()[:140]}" for number, found, line in hits[:20])
    more = f"\n  ... and {len(hits) - 20} more" if len(hits) > 20 else ""
    return f"{len(hits)} offending line(s) in {name}:\n{shown}{more}"


def _is_commit_like(token: str) -> bool:
    return any(c.isdigit() for c in token) and any(c in "abcdef" for c in token)


@pytest.mark.parametrize("name", DOCS)
def test_no_commit_hashes(name):
    hits = [(number, token, line) for number, line in _lines(name)
            for token in HEX.findall(line) if _is_commit_like(token)]
    assert not hits, "commit hashes belong to git, not the docs; " + _report(name, hits)


@pytest.mark.parametrize("name", DOCS)
def test_no_times_of_day(name):
    hits = [(number, match.group(), line) for number, line in _lines(name) for match in TIME_OF_DAY.finditer(line)]
    assert not hits, "give a run's date, not its time of day; " + _report(name, hits)


@pytest.mark.parametrize("name", DOCS)
def test_no_words_about_the_work(name):
    hits = [(number, word, line) for number, line in _lines(name)
            for word in PROCESS_WORDS if word in line.lower()]
    assert not hits, "state the present (history goes to CHANGELOG.md); " + _report(name, hits)


@pytest.mark.parametrize("name", DOCS)
def test_length(name):
    lines = _lines(name)
    assert len(lines) <= MAX_LINES[name], (
        f"{name} has {len(lines)} lines, at most {MAX_LINES[name]}; the first line past the limit is "
        f"{name}:{MAX_LINES[name] + 1}: {lines[MAX_LINES[name]][1].strip()[:140]}")


def test_the_detectors_catch_what_they_are_for():
    assert _is_commit_like("7c363eb") and _is_commit_like("8d17c03")
    assert not _is_commit_like("1000000") and not _is_commit_like("deadbee")
    assert HEX.findall("sha256 " + "ab12" * 16) == []
    assert TIME_OF_DAY.findall("ran 2026-12-03, 14:38-16:46") == ["14:38", "16:46"]
    assert TIME_OF_DAY.findall("x[1:10], a ratio of 1:2, cuda:0") == []
