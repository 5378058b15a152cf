"""Several processes under torchrun (gloo on the CPU): tables and training over 2 ranks, failures, checkpoint sets.

The multi-process tests launch ``python -m torch.distributed.run --standalone --nproc-per-node 2`` as a
subprocess (what users run), with tiny budgets; the rest are unit tests of the pieces.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from synthenv import distributed
from synthenv.agents import PPOConfig, TrainConfig, Trainer
from synthenv.agents.policy.files import load_policy
from synthenv.cli import main
from synthenv.distributed import Team

pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                reason="this torch has no torch.distributed with gloo")

TIMING = {"wall_s", "programs_per_s", "median_seconds", "seconds"}
"""Fields that measure time or speed: the only ones that may differ between a 1- and a 2-process run."""
TABLE = ["table", "--tasks", "reverse-tune", "print-hello", "--algos", "random", "ga", "--seeds", "2", "--npe", "120",
         "--max-len", "6"]


def torchrun(args: list[str], tmp_path: Path, env: dict | None = None,
             timeout: float = 120) -> subprocess.CompletedProcess:
    """``torchrun --standalone --nproc-per-node 2 args...``; stdout and stderr together."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", *args]
    environment = {**os.environ, "SYNTHENV_NUM_THREADS": "1", **(env or {})}
    return subprocess.run(command, cwd=tmp_path, env=environment, capture_output=True, text=True, timeout=timeout)


def without_timing(value):
    """``value`` (JSON data) less its timing fields."""
    if isinstance(value, dict):
        return {k: without_timing(v) for k, v in value.items() if k not in TIMING}
    if isinstance(value, list):
        return [without_timing(v) for v in value]
    return value


def test_a_table_over_two_ranks_equals_the_one_process_table_and_resumes(tmp_path):
    assert main(TABLE + ["--out", str(tmp_path / "one")]) == 0
    done = torchrun(["-m", "synthenv", *TABLE, "--out", str(tmp_path / "two")], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    one, two = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("one", "two"))
    assert len(two["cells"]) == 4 and without_timing(two) == without_timing(one)
    assert (tmp_path / "two.md").read_text().splitlines()[:4] == (tmp_path / "one.md").read_text().splitlines()[:4]
    # resume: the cells left in the JSON are skipped by every rank, the missing ones computed again, identically
    kept = dict(two, cells=two["cells"][1:3])
    (tmp_path / "two.json").write_text(json.dumps(kept))
    done = torchrun(["-m", "synthenv", *TABLE, "--out", str(tmp_path / "two")], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count(" solved, median ") == 2  # one line per computed cell: the two dropped ones only
    assert without_timing(json.loads((tmp_path / "two.json").read_text())) == without_timing(one)


def test_training_over_two_ranks_splits_the_seeds_and_checkpoints_a_set(tmp_path):
    common = ["train", "--task", "reverse-tune", "--algo", "random", "--batch-size", "8", "--npe", "64", "--num-seeds",
              "3", "--max-len", "6", "--log-dir", "None", "--log-every", "2", "--no-progress"]
    assert main(common + ["--json-out", str(tmp_path / "one.json")]) == 0
    done = torchrun(["-m", "synthenv", *common, "--json-out", str(tmp_path / "two.json"),
                     "--checkpoint", str(tmp_path / "ck.pt")], tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("seed ") == 3  # rank 0 prints the summary of all seeds, once
    one, two = (json.loads((tmp_path / f"{name}.json").read_text()) for name in ("one", "two"))
    assert [r["seed"] for r in two] == [0, 1, 2] and without_timing(two) == without_timing(one)
    assert sorted(p.name for p in tmp_path.glob("ck*")) == ["ck.rank0-of-2.pt", "ck.rank1-of-2.pt"]
    assert main(common + ["--resume", str(tmp_path / "ck.pt")]) == 2  # a set of 2 ranks, resumed by one process
    # a rank that fails (its checkpoint is missing) ends the job; rank 0 says which rank and why
    (tmp_path / "ck.rank1-of-2.pt").unlink()
    done = torchrun(["-m", "synthenv", *common, "--npe", "128", "--resume", str(tmp_path / "ck.pt")], tmp_path)
    assert done.returncode != 0
    assert "synthenv train (rank 0): error: rank 1 failed: rank 1 has no checkpoint to resume from" in done.stderr


WORKER = """
import sys, time
from synthenv import distributed
team = distributed.start("cpu", "test")
try:
    with team.guard():
        {body}
except Exception as error:
    print(f"rank {{team.rank}} stopped: {{error}}", file=sys.stderr, flush=True)
    sys.exit(1)
print(f"rank {{team.rank}} finished", flush=True)
"""


def run_worker(tmp_path: Path, body: str, env: dict | None = None) -> subprocess.CompletedProcess:
    script = tmp_path / "worker.py"
    script.write_text(WORKER.format(body=textwrap.indent(textwrap.dedent(body), " " * 8).strip()))
    return torchrun([str(script)], tmp_path, env)


def test_a_program_found_on_rank_0_reaches_the_queues_of_rank_1(tmp_path):
    done = run_worker(tmp_path, """
        import torch
        from synthenv.agents import PPOConfig, TrainConfig, Trainer
        from synthenv.language import decode_batch, encode_batch
        config = PPOConfig(batch_size=16, islands=2, island_size=4, queue_size=4, variants_per_parent=2)
        seeds = team.split((0, 1, 2))  # rank 0: 2 members, rank 1: 1 (queues padded to the same shape)
        trainer = Trainer(TrainConfig(task="reverse-tune", algo="ppo", algo_config=config, seeds=seeds, max_len=8,
                                      log_dir=None, progress=False, share_every=1), team=team)
        trainer.step()
        queue = trainer.algorithm.queue
        if team.rank == 0:  # a program no member wrote, with a reward no program can earn
            tokens = encode_batch([",[.,]"], length=8).expand(2, 1, 8)
            queue.push(tokens, torch.tensor([[2.0], [-1.0]]))
        trainer.share_programs()
        print(f"rank {team.rank} queue tops: {decode_batch(queue.tokens[:, 0])} {queue.rewards[:, 0].tolist()}")
        try:  # ranks launched with different options are refused on every rank
            team.require_same_command(f"--npe {team.rank}")
        except ValueError as error:
            print(f"rank {team.rank} refused: {error}")
    """)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("refused: the ranks have different options (rank 0: '--npe 0', rank 1: '--npe 1'); "
                             "run the same synthenv command") == 2
    assert "rank 1 queue tops: [',[.,]'] [2.0]" in done.stdout
    assert "rank 0 queue tops: [',[.,]', ',[.,]'] [2.0, 2.0]" in done.stdout


def test_policy_out_over_two_ranks_saves_the_seed_fine_tuned_most_once(tmp_path):
    """As in one process (tests/test_agents_pretrain.py): seed 0 solves print-hello in its elitist phase, its policy
    never updated, and seed 1 later, after its policy learned. Over two ranks, a seed each, the choice spans both:
    rank 1 saves seed 1's policy, and rank 0 neither writes nor warns that no policy was updated."""
    done = run_worker(tmp_path, """
        import warnings
        from synthenv.agents import PPOConfig, TrainConfig
        from synthenv.agents.run.trainer import train
        config = PPOConfig(batch_size=256, islands=4, island_size=8, queue_size=16, update_every=2,
                           fresh="uniform", idiom_fraction=0.0, library="none")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            train(TrainConfig(task="print-hello", algo="ppo", algo_config=config, npe=256 * 400, seeds=(0, 1),
                              log_dir=None, progress=False, policy_out="tuned.pt"), team)
        print(f"rank {team.rank} warned: {sum('--policy-out' in str(w.message) for w in caught)}")
    """)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "rank 0 warned: 0" in done.stdout and "rank 1 warned: 0" in done.stdout
    card = load_policy(tmp_path / "tuned.pt").card
    assert card["seed"] == 1 and card["updates"] > 0 and card["solved"]


def test_a_rank_that_raises_ends_the_job_and_rank_0_names_it(tmp_path):
    done = run_worker(tmp_path, """
        if team.rank == 1:
            raise RuntimeError("boom on rank 1")
        team.all_done(False)  # rank 0 waits at a sync point that rank 1 never reaches
    """)
    assert done.returncode != 0 and "finished" not in done.stdout
    # rank 0 says it, from its watcher thread or from its broken collective, whichever notices first
    assert re.search(r"(synthenv test \(rank 0\): error|rank 0 stopped): rank 1 failed: RuntimeError: boom on rank 1",
                     done.stderr), done.stderr


def test_a_rank_busy_computing_stops_when_another_fails(tmp_path):
    done = run_worker(tmp_path, """
        if team.rank == 1:
            team.report_failure("rank 1 failed: ValueError: bad input")  # what guard() does, then rank 1 lingers
        time.sleep(60)  # rank 0 computes, in no collective: its watcher must stop it
    """)
    assert done.returncode != 0 and "finished" not in done.stdout
    assert "synthenv test (rank 0): error: rank 1 failed: ValueError: bad input; stopping every rank" in done.stderr


def test_a_rank_that_hangs_is_named_by_rank_0_after_the_timeout(tmp_path):
    done = run_worker(tmp_path, """
        if team.rank == 1:
            time.sleep(60)  # hangs
        team.all_done(False)
    """, env={"SYNTHENV_DIST_TIMEOUT": "3"})
    assert done.returncode != 0
    assert "rank 0 stopped:" in done.stderr and "Ranks 1 failed to pass monitoredBarrier" in done.stderr
    assert "SYNTHENV_DIST_TIMEOUT" in done.stderr


# -- one process ---------------------------------------------------------------------------------------

def test_without_torchrun_there_is_no_team(monkeypatch):
    for name in distributed.TORCHRUN_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    assert not distributed.launched() and distributed.start("cpu") is None


def test_members_share_their_best_programs_in_one_process():
    config = PPOConfig(batch_size=16, islands=2, island_size=4, queue_size=4, variants_per_parent=2)
    trainer = Trainer(TrainConfig(task="reverse-tune", algo="ppo", algo_config=config, seeds=(0, 1), max_len=8,
                                  log_dir=None, progress=False, engine="torch", share_every=1))
    trainer.step()
    queue = trainer.algorithm.queue
    program = torch.tensor([[7, 3, 6, 7, 4, 0, 0, 0]])  # ",[.,]"
    queue.push(torch.stack([program, program]), torch.tensor([[2.0], [-1.0]]))
    assert queue.rewards[1, 0] < 2.0
    trainer.share_programs()
    assert queue.rewards[:, 0].tolist() == [2.0, 2.0] and (queue.tokens[:, 0] == program).all()


def test_sharing_is_checked():
    with pytest.raises(ValueError, match="share_every must be an int >= 0"):
        TrainConfig(share_every=-1)


@pytest.mark.parametrize("count,world,expected", [(6, 3, [(0, 1), (2, 3), (4, 5)]), (5, 2, [(0, 1, 2), (3, 4)]),
                                                  (2, 2, [(0,), (1,)])])
def test_seeds_split_into_contiguous_shares_differing_by_at_most_one(count, world, expected):
    teams = [Team(rank, world, rank, "cpu", "gloo", 1.0, None) for rank in range(world)]
    assert [team.split(tuple(range(count))) for team in teams] == expected


def test_fewer_seeds_than_ranks_is_refused():
    with pytest.raises(ValueError, match="1 seed.s. for 2 ranks: .*--num-seeds 2 or more"):
        Team(0, 2, 0, "cpu", "gloo", 1.0, None).split((0,))


def test_checkpoint_sets_resume_only_on_as_many_ranks(tmp_path):
    path = str(tmp_path / "run.pt")
    for rank in range(2):
        Path(distributed.rank_checkpoint(path, rank, 2)).write_bytes(b"x")
    assert distributed.resume_checkpoint(path, 1, 2) == str(tmp_path / "run.rank1-of-2.pt")
    with pytest.raises(ValueError, match="written by a job of 2 ranks .*this job has 3; resume with 2 processes"):
        distributed.resume_checkpoint(path, 0, 3)
    with pytest.raises(ValueError, match="is a checkpoint set of 2 ranks .*resume it under torchrun"):
        distributed.single_process_resume(path)
    Path(path).write_bytes(b"x")
    other = str(tmp_path / "other.pt")
    Path(other).write_bytes(b"x")
    with pytest.raises(ValueError, match="written by one process, this job has 2 ranks"):
        distributed.resume_checkpoint(other, 0, 2)


def test_threads_and_devices_per_rank(monkeypatch):
    monkeypatch.setenv(distributed.THREADS_VARIABLE, "3")
    assert distributed.threads_per_rank(2) == 3
    monkeypatch.setenv(distributed.THREADS_VARIABLE, "0")
    with pytest.raises(ValueError, match=r"\$SYNTHENV_NUM_THREADS must be an int >= 1, got '0'"):
        distributed.threads_per_rank(2)
    assert distributed.rank_device("cpu", 1) == "cpu"
    with pytest.raises(ValueError, match="give --device cuda"):
        distributed.rank_device("cuda:1", 0)
