"""synthenv.llm: programs pulled out of completions, the reward against the reference interpreter, prompts and
datasets, bad rows as clear errors, and examples/grpo_trl.py for two GRPO steps on a tiny model built here.

The TRL run needs the ``llm`` extra (``pip install -e '.[llm]'``; CI installs it): without it that test is skipped
with the reason.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

from synthenv import llm, reference, tasks
from synthenv.errors import UserError
from synthenv.language import MAX_LEN
from synthenv.tasks import Task

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("completion, program", [
    ("```bf\n,[.,]\n```", ",[.,]"),
    ("Here:\n```brainfuck\n+++ add three\n. print\n```\nDone.", "+++."),  # prose inside a block is a comment
    ("First ```\n+.\n``` then better ```bf\n++.\n```", "++."),  # the last block
    ("```bf\n```", ""),  # an empty block: the empty program
    ("The answer is ,[>,]<[.<] I think.", ",[>,]<[.<]"),  # no block: the longest run of commands
    ("Use + + . or maybe ,[.,]", ",[.,]"),  # spaces inside a run; the run with more commands
    ("Sorry, I cannot.", None),  # prose punctuation is not a program
    ("", None),
    ([{"role": "assistant", "content": "```bf\n-.\n```"}], "-."),  # a chat completion: its last message
    ([{"role": "assistant", "content": [{"type": "text", "text": "```\n+.\n```"}]}], "+."),
    ([], None),
])
def test_extract_program(completion, program):
    assert llm.extract_program(completion) == program


def _random_program(rng: random.Random) -> str:
    return "".join(rng.choice("><+-[].,") for _ in range(rng.randrange(1, 30)))


TASKS = ["reverse", "add", "print-hello"]


def _text_task() -> Task:
    return Task.from_pairs("llm-upper", [("ab", "AB"), ("x", "X"), ("", "")])  # the standard (strict) dialect


@pytest.mark.parametrize("kind", llm.KINDS)
def test_the_reward_equals_the_reference_interpreter_on_every_row(kind):
    rng = random.Random(0)
    suite = [tasks.get(name) for name in TASKS] + [_text_task()]
    known = [",[>,]+[,<.]", ",[.,]", ",[--------------------------------.,]", "+[>+]"]
    rows, names = [], []
    for i in range(400):
        task = suite[i % len(suite)]
        program = rng.choice(known) if i % 5 == 0 else _random_program(rng)
        rows.append(f"Answer:\n```bf\n{program}\n```" if i % 3 else f"maybe {program} works")
        names.append(task.name)
    rows += ["no program here", "x" * 10]
    names += ["reverse", "llm-upper"]
    scores = llm.Reward(suite, kind=kind)(completions=rows, task=names, prompts=["p"] * len(rows), trainer_state=None)
    assert len(scores) == len(rows) and all(isinstance(s, float) for s in scores)
    by_name = {task.name: task for task in suite}
    for completion, name, got in zip(rows, names, scores):
        program, task = llm.extract_program(completion), by_name[name]
        if program is None:
            assert got == llm.INVALID[kind]
            continue
        oracle = reference.score_program(program, task.cases, task.base, task.max_steps, task.dialect,
                                         stop_at_failure=kind != "cases")
        if kind == "pqt":
            expected = oracle.reward
        elif kind == "solved":
            expected = float(oracle.solved)
        else:
            right = [run.status == 0 and task.dialect.judged(run.output) == task.dialect.judged(out)
                     for run, (_, out) in zip(oracle.runs, task.cases)]
            expected = sum(right) / task.num_cases
        assert got == pytest.approx(expected, abs=1e-12), (completion, name)
    assert {1.0} <= set(llm.Reward(suite, kind="solved")(completions=rows, task=names))  # known solutions solve


def test_what_is_not_a_program_scores_the_documented_invalid_value():
    reward = llm.Reward("reverse")
    too_long = "```bf\n" + "+" * (MAX_LEN + 1) + "\n```"
    assert reward(completions=["Sorry.", too_long, ""], task="reverse") == [-1.0, -1.0, -1.0]
    assert llm.Reward("reverse", kind="cases", invalid=-0.5)(completions=["no"], task=["reverse"]) == [-0.5]
    assert reward(completions=[], task=[]) == []
    strict = llm.Reward(_text_task())  # an unmatched bracket fails in a strict dialect: the task's reward, no raise
    assert strict(completions=["```bf\n,[.,\n```"], task=["llm-upper"]) == [-2.0 / (4 * 3)]


def test_bad_rows_are_one_error_naming_the_row():
    reward = llm.Reward(["reverse", "add"])
    with pytest.raises(UserError, match=r"row 1: task 'nope' is not one this reward scores \(reverse, add\)"):
        reward(completions=[",.", ",."], task=["add", "nope"])
    with pytest.raises(UserError, match="2 completions but 1 task names"):
        reward(completions=[",.", ",."], task=["add"])
    with pytest.raises(UserError, match="needs the task of each completion: a 'task' column"):
        reward(completions=[",."])
    with pytest.raises(UserError, match="row 0: a completion is a string or a list of chat messages"):
        reward(completions=[42], task=["add"])
    with pytest.raises(UserError, match="kind must be one of 'pqt', 'solved', 'cases', got 'best'"):
        llm.Reward("add", kind="best")
    with pytest.raises(ValueError, match="device must be a torch device such as 'cpu'.*got 'tpu'"):
        llm.Reward("add", device="tpu")
    with pytest.raises(UserError, match="examples must be an int >= 0"):
        llm.prompt("add", examples=-1)


def test_prompts_show_the_task_its_examples_and_its_dialect():
    text = llm.prompt(_text_task(), examples=2)
    assert "Example 1: input 'ab' -> output 'AB'" in text and "Example 2: input 'x' -> output 'X'" in text
    assert "Example 3" not in text
    assert "Every [ must have a matching ]" in text and "Moving left of the first cell is an error" in text
    pqt = llm.prompt("reverse", examples=1)
    assert "An unmatched bracket is skipped" in pqt and "lists of integers" in pqt and "at most 5000 steps" in pqt
    chat = llm.prompt("reverse", chat=True)
    assert [m["role"] for m in chat] == ["system", "user"] and chat[0]["content"] == llm.SYSTEM


def test_a_dataset_has_a_prompt_and_a_task_column_per_row():
    pytest.importorskip("datasets", reason="synthenv.llm.dataset needs the llm extra (pip install -e '.[llm]')")
    train = llm.dataset(["reverse", "add"], examples=1, repeat=3)
    assert train.column_names == ["prompt", "task"] and len(train) == 6
    assert train["task"] == ["reverse"] * 3 + ["add"] * 3
    assert train["prompt"][0] == llm.prompt("reverse", examples=1)
    chat = llm.dataset("paper", chat=True)
    assert len(chat) == 26 and chat["prompt"][0][1]["role"] == "user"


def test_the_benchmark_rewards_agree_with_the_reference():
    from synthenv.bench_reward import completions, measure, python_reward

    rows = completions(64, seed=1)
    assert sum(llm.extract_program(row) is None for row in rows) > 0  # some hold no program, as models write
    names = ["reverse"] * 64
    assert python_reward(rows, names, {"reverse": tasks.get("reverse")}) == \
        pytest.approx(llm.Reward("reverse")(completions=rows, task=names), abs=1e-12)
    rate = measure(64, "paper", group=8, repeats=1)  # asserts the two rewards agree on every row
    assert rate.batch == 64 and rate.synthenv_per_s > 0 and rate.python_per_s > 0


def _tiny_model(folder: Path) -> None:
    """A 1-layer Llama with a character tokenizer, built from a config (nothing comes from a model hub)."""
    import torch
    from tokenizers import Tokenizer, decoders, models
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate(["<pad>", "<eos>", "<unk>", "\n", "\t"]
                                                 + [chr(c) for c in range(32, 127)])}
    tokenizer = Tokenizer(models.BPE(vocab=vocab, merges=[], unk_token="<unk>"))  # no merges: one token a character
    tokenizer.decoder = decoders.Fuse()
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, eos_token="<eos>", pad_token="<pad>", unk_token="<unk>")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=1024,
                         pad_token_id=0, eos_token_id=1, bos_token_id=1)
    LlamaForCausalLM(config).save_pretrained(folder)
    fast.save_pretrained(folder)


def test_the_grpo_example_runs_two_steps_and_logs_reward_and_solve_rate(tmp_path):
    pytest.importorskip("trl", reason="examples/grpo_trl.py needs the llm extra (pip install -e '.[llm]')")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    _tiny_model(tmp_path / "model")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    env.pop("TENSORBOARD_LOGGING_DIR", None)
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "grpo_trl.py"), "--model", str(tmp_path / "model"),
                           "--suite", "reverse", "add", "--max-steps", "2", "--num-generations", "4", "--batch-size",
                           "4", "--max-completion-length", "24", "--log-dir", str(tmp_path / "run"), "--json-out",
                           str(tmp_path / "summary.json")], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["steps"] == 2 and summary["tasks"] == 2 and summary["reward_calls"] == 2
    assert summary["reward"] is not None and -1.0 <= summary["reward"] <= 1.0
    assert summary["solve_rate"] is not None and 0.0 <= summary["solve_rate"] <= 1.0
    events = list((tmp_path / "run" / "tensorboard").rglob("events.out.tfevents.*"))
    assert events, "no TensorBoard events written"
    accumulator = EventAccumulator(str(events[0]))
    accumulator.Reload()
    tags = set(accumulator.Tags()["scalars"])
    assert {"train/reward", "train/rewards/synthenv_pqt/mean", "train/rewards/synthenv_solved/mean"} <= tags
    assert len(accumulator.Scalars("train/reward")) == 2
