"""Every ``--help`` reads as plain text: no reStructuredText markup, no references to files users lack."""

from __future__ import annotations

import pytest

from synthenv.cli import COMMANDS, main

FORBIDDEN = ("``", "PQT_SPEC", ":class:", ":func:", ":meth:")

# cli/train.py and cli/table.py are being rewritten (issue 11: a tyro CLI generated from the configs); their
# current docstrings still carry ``x`` and PQT_SPEC. Drop this mark when the rewrite is merged.
REWRITTEN = {"train", "table"}


def help_text(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", [
    pytest.param(name, marks=pytest.mark.xfail(strict=True, reason="rewritten by the lead; see REWRITTEN"))
    if name in REWRITTEN else name for name in COMMANDS])
def test_command_help_is_plain_text(capsys, command):
    text = help_text(capsys, [command])
    assert f"usage: synthenv {command}" in text
    found = [word for word in FORBIDDEN if word in text]
    assert not found, f"synthenv {command} --help shows {found}:\n{text}"


@pytest.mark.xfail(strict=True, reason="lists the train and table docstrings, rewritten by the lead; see REWRITTEN")
def test_top_level_help_is_plain_text(capsys):
    text = help_text(capsys, [])
    assert all(name in text for name in COMMANDS)
    found = [word for word in FORBIDDEN if word in text]
    assert not found, f"synthenv --help shows {found}:\n{text}"
