"""Every ``--help`` reads as plain text: no reStructuredText markup, no references to files users lack."""

from __future__ import annotations

import pytest

from synthenv.cli import COMMANDS, main

FORBIDDEN = ("``", "PQT" + "_SPEC", ":class:", ":func:", ":meth:")  # split: not a citation (test_citations.py)


def help_text(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--help"])
    assert exit_info.value.code == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("command", list(COMMANDS))
def test_command_help_is_plain_text(capsys, command):
    text = help_text(capsys, [command])
    assert f"usage: synthenv {command}" in text
    found = [word for word in FORBIDDEN if word in text]
    assert not found, f"synthenv {command} --help shows {found}:\n{text}"


def test_top_level_help_is_plain_text(capsys):
    text = help_text(capsys, [])
    assert all(name in text for name in COMMANDS)
    found = [word for word in FORBIDDEN if word in text]
    assert not found, f"synthenv --help shows {found}:\n{text}"


@pytest.mark.parametrize("algo", __import__("synthenv.agents", fromlist=["names"]).names())
def test_every_algorithms_options_read_as_plain_text(capsys, algo):
    """``synthenv train --algo NAME --help`` lists that algorithm's config fields, docstrings included."""
    text = help_text(capsys, ["train", "--algo", algo])
    found = [word for word in FORBIDDEN if word in text]
    assert "--batch-size" in text and not found, f"synthenv train --algo {algo} --help shows {found}"
