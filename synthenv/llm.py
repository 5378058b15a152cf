"""synthenv as the reward and the task suite of a language model trained by RL (TRL's ``GRPOTrainer`` and friends).

Three pieces, each usable alone:

- **Prompts and datasets** (``prompt``, ``dataset``): a task's description, a few of its examples (as text for a
  text task, as numbers otherwise) and its dialect in words, in plain or chat form; ``dataset`` makes a
  ``datasets.Dataset`` of any suite (``"paper"``, ``"generated-text-train:200"``, task files,
  ``"esolang:PATH"``...) with a ``prompt`` column and the task's name in a ``task`` column.
- **Programs from completions** (``extract_program``): the last fenced code block, its BF commands (anything else
  in a BF program is a comment); without a block, the longest run of commands in the text (of at least
  ``MIN_UNFENCED``); ``None`` when there is none. Plain strings and chat completions (a list of messages) both.
- **The reward** (``Reward``): a callable in TRL's ``reward_funcs`` signature (keyword arguments ``completions``,
  the dataset's ``task`` column and whatever else TRL passes; a ``list[float]`` back). It groups a batch by task
  and scores each group with one call of the compiler and engine the env uses (``synthenv.pipeline.Evaluator``),
  on its device. ``kind`` chooses the score: ``"pqt"`` (the PQT reward, 1.0 = solved, docs/semantics.md),
  ``"solved"`` (1.0 or 0.0) or ``"cases"`` (the share of the task's cases whose output is right). Every case of
  the task is scored, not only the ones the prompt shows.

What a completion without a program scores is ``Reward.invalid`` (documented per kind: -1.0 for ``pqt``, below
every reward a program can get; 0.0 for the others); a program longer than ``synthenv.language.MAX_LEN`` (4 096)
commands scores the same. A program that does not run (an unmatched bracket in a strict dialect, ``<`` at cell 0
where that is an error, the step limit) scores what the task's reward gives it, as in the env. A row whose task the
reward does not know, or a batch whose columns do not line up, raises ``UserError`` naming the row.

>>> from synthenv import llm
>>> reward = llm.Reward("reverse", kind="solved")
>>> reward(completions=["```bf\\n,[>,]+[,<.]\\n```", "no idea", ",[.,]"], task=["reverse"] * 3)
[1.0, 0.0, 0.0]
>>> llm.extract_program("Here:\\n```brainfuck\\n+++. print 3\\n```\\nDone."), llm.extract_program("Sorry.")
('+++.', None)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
import re

import torch

from synthenv import tasks as task_registry
from synthenv.compilers import DEFAULT_BACKEND
from synthenv.checks import resolve_device
from synthenv.errors import UserError
from synthenv.language import COMMANDS, MAX_LEN, encode_batch
from synthenv.pipeline import Evaluator
from synthenv.tasks import Task

KINDS = ("pqt", "solved", "cases")
"""What ``Reward`` scores: the PQT reward, solved (1/0), or the share of cases passed."""
INVALID = {"pqt": -1.0, "solved": 0.0, "cases": 0.0}
"""The score of a completion with no program (or one over ``MAX_LEN`` commands), per kind: -1.0 is below every PQT
reward (a failing program gets ``-2 / (4 K)`` >= -0.5, a wrong output more)."""
MIN_UNFENCED = 3
"""The fewest commands a run outside a code block needs to count as a program (prose has its ``.`` and ``,``)."""
_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.DOTALL)
_COMMAND = f"[{re.escape(COMMANDS)}]"
_RUN = re.compile(f"{_COMMAND}+(?:[ \t]*{_COMMAND}+)*")
_NOT_COMMAND = re.compile(f"[^{re.escape(COMMANDS)}]+")
SYSTEM = ("You write Brainfuck programs. Brainfuck has eight commands: > < move the pointer, + - change the cell, "
          ". prints the cell, , reads the next input value into the cell, [ ] loop while the cell is not zero. Every "
          "other character is a comment.")
"""The system message of a chat prompt (and the first line of a plain one)."""


def extract_program(completion: str | Sequence[dict]) -> str | None:
    """The BF program in a completion: the BF commands of its last fenced code block (other characters are
    comments), else its longest run of commands (spaces between commands allowed) if it has at least
    ``MIN_UNFENCED`` commands, else None.

    ``completion`` is a string or a chat completion (messages with ``content``: the last one is read).

    >>> extract_program([{"role": "assistant", "content": "Try `,.`: ```\\n,[.,]\\n```"}])
    ',[.,]'
    >>> extract_program("It is ,[.,] or maybe +.")
    ',[.,]'
    """
    if not isinstance(completion, str):
        completion = _message_text(completion)
    blocks = _FENCE.findall(completion) if "```" in completion else None
    if blocks:
        return _NOT_COMMAND.sub("", blocks[-1])
    runs = [run.replace(" ", "").replace("\t", "") for run in _RUN.findall(completion)]
    longest = max(runs, key=len, default="")
    return longest if len(longest) >= MIN_UNFENCED else None


def _message_text(completion) -> str:
    if isinstance(completion, Sequence) and completion and isinstance(completion[-1], dict):
        content = completion[-1].get("content", "")
        if isinstance(content, list):  # multimodal message parts: the text ones
            content = "".join(part.get("text", "") for part in content if isinstance(part, dict))
        return content if isinstance(content, str) else ""
    if isinstance(completion, Sequence) and not completion:
        return ""
    raise TypeError(f"a completion is a string or a list of chat messages (dicts with 'content'), got "
                    f"{type(completion).__name__}")


def suite(specs: str | Task | Iterable[str | Task]) -> list[Task]:
    """The tasks a spec names, as ``synthenv table --tasks`` reads them: suites (``"paper"``,
    ``"generated-text-train:100"``, ``"esolang:PATH"``), task names, ``*.json`` task files, or ``Task``s."""
    if isinstance(specs, (str, Task)):
        specs = [specs]
    found: list[Task] = []
    for spec in specs:
        if isinstance(spec, Task):
            found.append(spec)
        else:
            found += [task_registry.from_spec(name) for name in task_registry.expand(spec)]
    if not found:
        raise UserError("the suite names no task; pass a suite such as 'paper', task names or task files")
    return found


def describe_dialect(task: Task) -> str:
    """The task's dialect, in the words a prompt uses."""
    dialect = task.dialect
    cells = f"Cells hold 0 to {task.base - 1} and wrap around."
    brackets = ("Every [ must have a matching ]." if dialect.strict
                else "An unmatched bracket is skipped.")
    edge = {"clamp": "Moving left of the first cell stays on it.", "error": "Moving left of the first cell is an error.",
            "wrap": f"The tape is a ring of {dialect.tape_cells} cells."}[dialect.left_edge]
    end = {"zero": "Reading past the end of the input gives 0.",
           "max": f"Reading past the end of the input gives {task.base - 1}.",
           "unchanged": "Reading past the end of the input leaves the cell unchanged."}[dialect.end_of_input]
    out = ("Trailing whitespace in the output is ignored." if dialect.output == "rstrip"
           else "The output must match exactly.")
    return f"{cells} {brackets} {edge} {end} {out} A run may take at most {task.max_steps} steps."


def prompt(task: Task | str, examples: int = 3, chat: bool = False) -> str | list[dict]:
    """The prompt that asks for a program solving ``task``: its description, its first ``examples`` cases and its
    dialect; a string, or with ``chat`` a list of messages (system, user).

    >>> print(prompt("reverse", examples=1))  # doctest: +ELLIPSIS
    You write Brainfuck programs. ...
    Task: reverse: reverse the input, then print 0
    Input and output are lists of integers (the input is read with , one value at a time).
    Example 1: input [50, 175, 243, 103, 40] -> output [40, 103, 243, 175, 50, 0]
    Cells hold 0 to 255 and wrap around. An unmatched bracket is skipped. ...
    Answer with the program in a ```bf code block.
    """
    task = task_registry.from_spec(task)
    if not isinstance(examples, int) or isinstance(examples, bool) or examples < 0:
        raise UserError(f"examples must be an int >= 0 (how many of the task's cases the prompt shows), got "
                        f"{examples!r}")
    lines = [f"Task: {task.name}" + (f": {task.description}" if task.description else "")]
    if task.text:
        lines.append("Input and output are text (the input is read with , one byte at a time).")
    else:
        lines.append("Input and output are lists of integers (the input is read with , one value at a time).")
    for number, (inputs, expected) in enumerate(task.cases[:examples], start=1):
        lines.append(f"Example {number}: input {task.show(inputs)} -> output {task.show(expected)}")
    lines.append(describe_dialect(task))
    lines.append("Answer with the program in a ```bf code block.")
    user = "\n".join(lines)
    if chat:
        return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]
    return SYSTEM + "\n" + user


def dataset(specs: str | Task | Iterable[str | Task], examples: int = 3, chat: bool = False, repeat: int = 1):
    """A ``datasets.Dataset`` of the suite's tasks: a ``prompt`` column (``prompt``) and a ``task`` column (the
    task's name, which ``Reward`` reads), each task ``repeat`` times. Needs ``pip install 'synthenv[llm]'``."""
    try:
        import datasets
    except ImportError:
        raise UserError("synthenv.llm.dataset needs the datasets library: pip install 'synthenv[llm]'") from None
    if not isinstance(repeat, int) or isinstance(repeat, bool) or repeat < 1:
        raise UserError(f"repeat must be an int >= 1 (how many rows each task gets), got {repeat!r}")
    found = suite(specs)
    rows = [(prompt(task, examples, chat), task.name) for task in found for _ in range(repeat)]
    return datasets.Dataset.from_dict({"prompt": [p for p, _ in rows], "task": [name for _, name in rows]})


class Reward:
    """A reward function in TRL's ``reward_funcs`` signature, scoring completions on synthenv's tasks (module
    docstring).

    Args:
        specs: the tasks rows may name (a suite, names, task files or ``Task``s; ``suite``).
        kind: ``"pqt"``, ``"solved"`` or ``"cases"`` (``KINDS``).
        backend, engine, device: what scores the programs (``synthenv.score``'s arguments).
        invalid: the score of a completion with no program (default ``INVALID[kind]``).
    """

    def __init__(self, specs: str | Task | Iterable[str | Task], kind: str = "pqt", backend: str = DEFAULT_BACKEND,
                 engine: str = "auto", device: torch.device | str | None = None, invalid: float | None = None):
        if kind not in KINDS:
            raise UserError(f"kind must be one of {', '.join(map(repr, KINDS))}, got {kind!r}")
        self.kind = kind
        self.invalid = INVALID[kind] if invalid is None else float(invalid)
        self.tasks = {task.name: task for task in suite(specs)}
        # the share of cases needs every case run; PQT's reward stops at a program's first failing case
        self.device = resolve_device(device or "cpu")  # a device this machine lacks: named before anything is built
        self.evaluator = Evaluator.create(backend, engine, self.device, early_abort=kind != "cases")
        self.__name__ = f"synthenv_{kind}"  # TRL logs each reward function's mean under its __name__

    def __call__(self, completions: Sequence, task: Sequence[str] | str | None = None, **kwargs) -> list[float]:
        """Scores of ``completions`` (strings or chat messages), row ``i`` on the task named ``task[i]``.

        Other keyword arguments (``prompts``, ``completion_ids``, ``trainer_state``, other columns) are ignored.
        """
        if task is None:
            raise UserError("the reward needs the task of each completion: a 'task' column in the dataset "
                            "(synthenv.llm.dataset writes one) or task=[...]")
        if isinstance(task, str):
            task = [task] * len(completions)
        if len(task) != len(completions):
            raise UserError(f"{len(completions)} completions but {len(task)} task names; each row needs its task")
        try:
            unknown = not self.tasks.keys() >= set(task)
        except TypeError:  # an unhashable task name: named below with its row
            unknown = True
        if unknown:
            row, name = next((row, name) for row, name in enumerate(task)
                             if not isinstance(name, str) or name not in self.tasks)
            known = ", ".join(list(self.tasks)[:5]) + (" ..." if len(self.tasks) > 5 else "")
            raise UserError(f"row {row}: task {name!r} is not one this reward scores ({known}); build the Reward "
                            "with the suite the dataset was built from")
        programs = []
        for row, completion in enumerate(completions):
            try:
                programs.append(extract_program(completion))
            except TypeError as error:
                raise UserError(f"row {row}: {error}") from None
        scores = [self.invalid] * len(completions)
        groups: dict[str, list[int]] = {}
        for row, (program, name) in enumerate(zip(programs, task)):
            if program is not None and len(program) <= MAX_LEN:
                groups.setdefault(name, []).append(row)
        for name, rows in groups.items():
            values = self._score([programs[row] for row in rows], self.tasks[name])
            for row, value in zip(rows, values):
                scores[row] = value
        return scores

    def _score(self, programs: list[str], task: Task) -> list[float]:
        tokens = encode_batch(programs, max(1, max(map(len, programs))), device=self.device)
        _, scores = self.evaluator(tokens, task, None)
        if self.kind == "pqt":
            values = scores.rewards
        elif self.kind == "solved":
            values = scores.solved.double()
        else:
            values = scores.case_correct.double().mean(dim=1)
        return values.tolist()  # sync point: TRL takes a list of floats
