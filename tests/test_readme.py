"""README's Python examples run as written, each block on its own, in a fresh namespace.

A block in doctest style (``>>>`` lines, each followed by the output it prints) runs as a doctest,
so the outputs the README shows are checked; a block without ``>>>`` just has to run. An example
marked ``# doctest: +SKIP`` is not run: each one must be listed in ``SKIPPED`` with the reason.
"""

from __future__ import annotations

import doctest
import io
import re
from pathlib import Path

import gymnasium
import pytest

from synthenv import tasks
from synthenv.env import env_id

README = Path(__file__).resolve().parents[1] / "README.md"
TEXT = README.read_text()
MATCHES = list(re.finditer(r"```python\n(.*?)```", TEXT, re.S))
BLOCKS = [m.group(1) for m in MATCHES]
LINES = [TEXT.count("\n", 0, m.start(1)) for m in MATCHES]  # 0-based line of each block's first line
OPTIONS = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
PARSER = doctest.DocTestParser()

SKIPPED = {
    'MaskablePPO("MultiInputPolicy", env, n_steps=64, seed=0).learn(20_000)':
        "20 000 timesteps of training take minutes on a 2-core CPU; tests/test_agents_sb3.py trains SB3's PPO and "
        "MaskablePPO through SB3VecEnv on a tiny task and checks that they learn",
    'GRPOTrainer(model="Qwen/Qwen2.5-0.5B-Instruct"':
        "the model comes from a hub these machines cannot reach, and GRPO on it takes hours on a CPU; "
        "tests/test_llm.py runs examples/grpo_trl.py for two steps on a tiny model built in the test",
}
"""The README examples that are not run (a piece of their source -> why)."""


def test_the_readme_has_python_examples_and_they_show_their_outputs():
    assert len(BLOCKS) >= 4
    assert all(">>> " in block for block in BLOCKS)  # the README's format: every example is a doctest


def test_only_the_listed_examples_are_skipped():
    skipped = [example.source for block in BLOCKS for example in PARSER.get_examples(block)
               if example.options.get(doctest.SKIP)]
    assert len(skipped) == len(SKIPPED) and len(skipped) <= 2  # few, each for a stated reason
    for piece in SKIPPED:
        assert sum(piece in source for source in skipped) == 1, f"{piece!r} is not a skipped README example"


def run_block(block: str, line: int) -> None:
    """Run one block: as a doctest if it has ``>>>`` lines, else as a script; AssertionError on a failure."""
    name = f"README.md python block at line {line + 1}"
    if ">>>" not in block:
        exec(compile(block, name, "exec"), {"__name__": "readme"})
        return
    test = PARSER.get_doctest(block, {"__name__": "readme"}, name, str(README), line)
    runner, report = doctest.DocTestRunner(optionflags=OPTIONS), io.StringIO()
    result = runner.run(test, out=report.write)
    assert result.attempted > 0
    assert result.failed == 0, report.getvalue()


@pytest.mark.parametrize("index", range(len(BLOCKS)), ids=[f"line{line + 1}" for line in LINES])
def test_readme_python_block(index):
    before = set(tasks.names("user"))
    try:
        run_block(BLOCKS[index], LINES[index])
    finally:  # an example that registers a task must not leak it into other tests
        for name in set(tasks.names("user")) - before:
            tasks.unregister(name)
            gymnasium.registry.pop(env_id(name), None)


def test_a_wrong_output_in_the_readme_would_fail():
    """The check above can fail: the quick start's block with one documented reward changed."""
    index = next(i for i, block in enumerate(BLOCKS) if "result.rewards" in block)
    wrong = BLOCKS[index].replace("-0.0312", "-0.0313")
    assert wrong != BLOCKS[index]
    with pytest.raises(AssertionError, match=r"Expected:\s+tensor\(\[ 1.0000, -0.0313"):
        run_block(wrong, LINES[index])
    run_block("import synthenv\nassert synthenv.score(['+.'], 'reverse').rewards.shape == (1,)\n", 0)  # plain
    with pytest.raises(AssertionError):
        run_block("assert 1 + 1 == 3\n", 0)
