"""Every size a user controls has a cap, checked before anything is allocated (docs/limits.md): the refused call
costs little memory and says which cap and what to do; a large batch that fits is evaluated in parts."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile

import pytest
import torch

import synthenv
from synthenv import api, tasks
from synthenv.env import SynthVecEnv
from synthenv.env.config import MAX_BATCH_VALUES, MAX_NUM_ENVS
from synthenv.errors import UserError
from synthenv.language import MAX_LEN, encode_batch
from synthenv.tasks import Task, generated

REFUSED_CALLS = r"""
import json, resource, sys, zipfile
import synthenv
from synthenv import tasks
from synthenv.agents.search.library import read_library
from synthenv.checkpoint import load_checkpoint
from synthenv.env import SynthVecEnv
from synthenv.errors import UserError
from synthenv.tasks import Task

big = Task.from_pairs("wide", [(list(range(8)), [i % 256] * 100) for i in range(100)])
calls = {
    "1e6 envs of 100 cases x 100 outputs": lambda: SynthVecEnv(big, num_envs=10**6),
    "a 100 000-token program": lambda: synthenv.score(["+" * 100_000], "add"),
    "a 100 000-id program": lambda: synthenv.score([[1] * 100_000], "add"),
    "a checkpoint that unpacks to 2.4 GB": lambda: load_checkpoint(sys.argv[1]),
    "a library read from /dev/zero": lambda: read_library("/dev/zero"),
    "generated-test:100000000": lambda: tasks.expand(["generated-test:100000000"]),
}
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
report = {}
for name, call in calls.items():
    try:
        call()
        report[name] = "accepted"
    except (ValueError, UserError) as error:
        report[name] = [str(error), (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024]
print(json.dumps(report))
"""


def test_each_refused_size_costs_under_200_mb_and_names_its_cap(tmp_path):
    bomb = tmp_path / "bomb.pt"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        with archive.open("archive/data.pkl", "w", force_zip64=True) as member:
            for _ in range(150):
                member.write(bytes(2**24))  # 2.4 GiB of zeros in 2.4 MB
    assert bomb.stat().st_size < 4 * 2**20
    done = subprocess.run([sys.executable, "-c", REFUSED_CALLS, str(bomb)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    caps = {"1e6 envs of 100 cases x 100 outputs": "MAX_BATCH_VALUES", "a 100 000-token program": "MAX_LEN",
            "a 100 000-id program": "MAX_LEN", "a checkpoint that unpacks to 2.4 GB": "MAX_CHECKPOINT_BYTES",
            "a library read from /dev/zero": "docs/limits.md", "generated-test:100000000": "MAX_SUITE_TASKS"}
    for name, cap in caps.items():
        assert report[name] != "accepted", name
        message, peak_mib = report[name]
        assert cap in message, (name, message)
        assert peak_mib < 200, (name, peak_mib)


def test_num_envs_and_the_batch_are_capped_before_allocation():
    with pytest.raises(ValueError, match=f"num_envs must be an int in \\[1, {MAX_NUM_ENVS}\\]"):
        SynthVecEnv("reverse", num_envs=MAX_NUM_ENVS + 1)
    task = tasks.get("reverse")
    per_env = 100 + task.num_cases * (task.max_output_length + 2)
    most = MAX_BATCH_VALUES // per_env
    with pytest.raises(ValueError, match=f"use num_envs <= {most}"):
        SynthVecEnv("reverse", num_envs=most + 1, mode="program")
    assert SynthVecEnv("reverse", num_envs=4096, mode="program").num_envs == 4096


def test_the_batched_spaces_are_built_only_when_asked_for():
    env = SynthVecEnv("reverse", num_envs=8, mode="program", max_len=5)
    assert "observation_space" not in vars(env) and "action_space" not in vars(env)
    assert env.observation_space["program"].shape == (8, 5) and env.action_space.shape == (8, 5)
    assert env.observation_space is env.observation_space


def test_generated_suites_and_task_counts_are_capped():
    assert len(tasks.expand([f"generated-test:{generated.MAX_SUITE_TASKS}"])) == generated.MAX_SUITE_TASKS
    with pytest.raises(UserError, match="more than the 10000 one suite may"):
        tasks.expand([f"generated-train:5:{6 + generated.MAX_SUITE_TASKS}"])
    with pytest.raises(UserError, match="count in 1 .. 10000"):
        tasks.expand(["generated-unseen:10001"])
    from synthenv.agents.pretraining.pretrain import PretrainConfig
    from synthenv.agents.search.library import LibraryConfig
    from synthenv.agents.search.prior import PriorConfig
    for config in (LibraryConfig, PriorConfig, PretrainConfig):
        with pytest.raises(ValueError, match="MAX_GENERATED_TASKS"):
            config(tasks=generated.MAX_GENERATED_TASKS + 1)
    with pytest.raises(ValueError, match=f"max_len must be an int in \\[1, {MAX_LEN}\\]"):
        PretrainConfig(max_len=MAX_LEN + 1)


@pytest.mark.parametrize(("argv", "words"), [
    (["library", "--tasks", "99999999999"], ["[0, 100000]", "99999999999"]),
    (["pretrain", "--max-len", "50000"], ["[1, 4096]", "50000"]),
    (["table", "--tasks", "generated-test:100000000"], ["MAX_SUITE_TASKS"]),
    (["bench-agents", "--max-len", "5000"], ["4096", "5000"]),
])
def test_the_commands_refuse_sizes_past_their_caps_in_one_line(capsys, tmp_path, argv, words):
    from synthenv.cli import main

    assert main(argv + (["--out", str(tmp_path / "out")] if argv[0] in ("library", "pretrain") else [])) == 2
    captured = capsys.readouterr()
    assert captured.err.count("\n") == 1 and all(word in captured.err for word in words), captured.err
    assert captured.out == ""  # bench-agents prints its header only once everything is checked


def test_encode_batch_checks_the_longest_program_before_it_allocates():
    with pytest.raises(ValueError, match="more than the 8 that synthenv accepts"):
        encode_batch(["+" * 9], max_length=8)
    assert encode_batch(["+" * 8], max_length=8).shape == (1, 8)


@pytest.mark.parametrize("backend", ["traditional", "neural", "hybrid"])
def test_a_large_batch_is_scored_in_parts_with_the_same_result(monkeypatch, backend):
    generator = torch.Generator().manual_seed(3)
    tokens = torch.randint(0, 9, (900, 12), generator=generator)
    tokens[:8] = encode_batch([",[.,]", ",.", ",[>,]<[.<]", "+[-]", "", ">", "<", "."], 12)
    whole = synthenv.score(tokens, "reverse", backend=backend)
    monkeypatch.setattr(api, "SCORE_CHUNK_TOKENS", 12 * 100)  # parts of 100 programs
    parts = synthenv.score(tokens, "reverse", backend=backend)
    for field in ("rewards", "solved", "status", "program_status", "outputs", "output_lengths", "steps",
                  "case_correct"):
        assert torch.equal(getattr(whole, field), getattr(parts, field)), field


@pytest.mark.parametrize("backend", ["traditional", "neural", "hybrid", "cpu"])
def test_every_backend_scores_programs_of_no_tokens(backend):
    result = synthenv.score(torch.zeros((3, 0), dtype=torch.int64), "add", backend=backend)
    reference = synthenv.score([""] * 3, "add", backend="cpu")
    assert torch.equal(result.rewards, reference.rewards) and torch.equal(result.status, reference.status)


def test_task_sizes_are_capped_where_the_task_is_made():
    with pytest.raises(ValueError, match="max_steps"):
        Task.from_pairs("t", [([1], [1])], max_steps=2**31 - 1)
    with pytest.raises(ValueError, match="base"):
        Task.from_pairs("t", [([1], [1])], base=2**31)


def test_a_library_of_only_long_programs_is_not_skipped_without_a_word():
    from synthenv.agents.search.library import Library

    with pytest.warns(UserWarning, match="longer than max_len 4"):
        assert Library(["+++++", ",[.,]+"]).tokens(4, torch.device("cpu")).shape == (0, 4)

