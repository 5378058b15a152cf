"""SynthVecEnv: rewards vs the oracle and synthenv.score, batching, autoreset, seeding, shapes, wrappers."""

from __future__ import annotations

import itertools

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import synthenv
from synthenv import reference, tasks
from synthenv.env import EpisodeStatistics, NumpyVecEnv, SynthEnv, SynthVecEnv, syntax_masks
from synthenv.language import Status, decode_batch, encode_batch

# Hand-picked programs: solved, wrong, empty, failing (step limit), unmatched brackets, idioms.
PROGRAMS = [",[>,]+[,<.]", ",[>,]<[.<]", ",[.,]", "+.", "", "[", "]]+.", ",.,.", ">,[>,]<[.<]", ",[-]+.", "+[]"]


def oracle(program: str, task) -> reference.ProgramScore:
    return reference.score_program(program, task.cases, task.base, task.max_steps, task.dialect)


def loop_free(num: int, length: int, seed: int) -> list[str]:
    """Random programs over ``><+-.,`` (no loops: cheap for the oracle) of 0..length commands."""
    rng = np.random.default_rng(seed)
    return ["".join(rng.choice(list("><+-.,"), size=rng.integers(0, length + 1))) for _ in range(num)]


def torch_dtype(space) -> torch.dtype:
    return torch.from_numpy(np.zeros(0, dtype=space.dtype)).dtype


@pytest.mark.parametrize("task_name", ["reverse", "add", "bool-logic", "print-hello", "count-char"])
def test_program_mode_rewards_equal_oracle_and_score(task_name):
    task = tasks.get(task_name)
    programs = PROGRAMS + ([task.solution] if task.solution else []) + loop_free(20, 12, seed=1)
    env = SynthVecEnv(task_name, num_envs=len(programs), max_len=40)
    env.reset(seed=0)
    obs, rewards, terminated, truncated, info = env.step(encode_batch(programs, 40))
    api = synthenv.score(programs, task_name)
    assert torch.equal(rewards, api.rewards.float())  # the env rounds float64 scores to float32 once
    assert torch.equal(info["solved"], api.solved)
    for i, program in enumerate(programs):
        truth = oracle(program, task)
        assert rewards[i].item() == pytest.approx(truth.reward, rel=1e-6, abs=1e-6), program
        assert bool(terminated[i]) == truth.solved and bool(truncated[i]) == (not truth.solved), program
        final = info["final_obs"]
        assert decode_batch(final["program"][i : i + 1]) == [program]
        assert final["reward"][i].item() == pytest.approx(truth.reward, rel=1e-6, abs=1e-6)
        for k, (run, (_, expected)) in enumerate(zip(truth.runs, task.cases)):
            passed = run.status == Status.OK and list(run.output) == list(expected) and not truth.failed
            assert bool(final["case_passed"][i, k]) == passed, (program, k)
            if not truth.failed:
                assert int(final["case_status"][i, k]) == Status.OK
                assert int(final["output_lengths"][i, k]) == len(run.output)
                width = min(len(run.output), final["outputs"].shape[-1])
                assert final["outputs"][i, k, :width].tolist() == list(run.output[:width])


@pytest.mark.parametrize("override", [{"max_steps": 40}, {"strict_syntax": True}, {"base": 251}])
def test_task_overrides_reach_the_oracle(override):
    env = SynthVecEnv("reverse", num_envs=len(PROGRAMS), max_len=16, **override)
    task = env.task
    assert all(getattr(task, key) == value for key, value in override.items())
    env.reset(seed=0)
    _, rewards, _, _, info = env.step(encode_batch(PROGRAMS, 16))
    for i, program in enumerate(PROGRAMS):
        truth = oracle(program, task)
        assert rewards[i].item() == pytest.approx(truth.reward, rel=1e-6, abs=1e-6), program
        if override.get("strict_syntax") and program in ("[", "]]+."):
            assert int(info["program_status"][i]) == Status.SYNTAX_ERROR


def write_tokens(env: SynthVecEnv, programs: list[str], steps: int):
    """Step a token-mode env with each program's tokens then EOS; collect every return."""
    tokens = encode_batch(programs, steps)  # [N, steps], EOS-padded
    env.reset(seed=0)
    return [env.step(tokens[:, t].contiguous()) for t in range(steps)]


def test_token_mode_ends_programs_independently_and_scores_them():
    programs = [",[>,]+[,<.]", "", "+.", ",[.,]", ",.,.,.", "]]+."]
    env = SynthVecEnv("reverse", num_envs=len(programs), mode="token", max_len=12)  # longer than every program
    steps = write_tokens(env, programs, 12)
    task = env.task
    for i, program in enumerate(programs):
        end = len(program)  # EOS is written at this step; then each EOS is a new, empty program
        empty = oracle("", task).reward
        for t, (obs, rewards, terminated, truncated, info) in enumerate(steps):
            assert not bool(truncated[i])
            assert bool(terminated[i]) == (t >= end), (program, t)
            if t > end:
                assert rewards[i].item() == pytest.approx(empty, abs=1e-6)
            if t < end:
                assert rewards[i].item() == 0.0 and int(obs["position"][i]) == t + 1
            if t == end:
                truth = oracle(program, task)
                assert rewards[i].item() == pytest.approx(truth.reward, rel=1e-6, abs=1e-6), program
                assert bool(info["solved"][i]) == truth.solved
                assert decode_batch(info["final_obs"]["program"][i : i + 1]) == [program]
                assert int(obs["position"][i]) == 0 and int(obs["program"][i].abs().sum()) == 0  # autoreset


def test_token_mode_program_ending_at_max_len_is_scored():
    program = ",[>,]+[,<.]"  # 11 tokens: with max_len=11 the last token ends it
    env = SynthVecEnv("reverse", num_envs=1, mode="token", max_len=len(program))
    steps = write_tokens(env, [program], len(program))
    rewards, terminated = steps[-1][1], steps[-1][2]
    assert rewards.tolist() == [1.0] and terminated.tolist() == [True]
    assert all(not bool(s[2][0]) for s in steps[:-1])


def test_masked_token_mode_writes_only_balanced_programs():
    env = SynthVecEnv("reverse", num_envs=64, mode="token", max_len=10)
    env.reset(seed=3)
    finished = []
    for _ in range(40):
        masks = env.action_masks()
        actions = env.sample_actions(masked=True)
        assert bool(masks.gather(1, actions[:, None]).all())
        _, _, terminated, _, info = env.step(actions)
        finished += [p for p, done in zip(decode_batch(info["final_obs"]["program"]), terminated.tolist()) if done]
    assert len(finished) > 64
    assert all(reference.match_brackets(p)[1] for p in finished)
    assert any("[" in p for p in finished)


@pytest.mark.parametrize("allow_eos", [True, False])
@pytest.mark.parametrize("max_len", [1, 2, 3, 4])
def test_syntax_masks_reach_exactly_the_balanced_programs(max_len, allow_eos):
    """Walk every masked path: the complete programs are exactly the balanced ones (none missing)."""
    complete, frontier = set(), [""]
    for position in range(max_len):
        depth = torch.tensor([p.count("[") - p.count("]") for p in frontier])
        masks = syntax_masks(torch.full((len(frontier),), position), depth, max_len, allow_eos)
        grown = []
        for prefix, legal in zip(frontier, masks.tolist()):
            for token, ok in enumerate(legal):
                if ok:
                    (complete.add(prefix) if token == 0 else grown.append(prefix + "_><+-[].,"[token]))
        frontier = grown
    complete |= set(frontier)  # programs that reached max_len
    lengths = range(max_len + 1) if allow_eos else [max_len]
    every = {"".join(p) for n in lengths for p in itertools.product("><+-[].,", repeat=n)}
    assert complete == {p for p in every if reference.match_brackets(p)[1]}


def test_vector_env_equals_single_envs_token_mode():
    num, steps = 5, 20
    vec = SynthVecEnv("print-hello", num_envs=num, mode="token", max_len=8)
    singles = [SynthEnv("print-hello", max_len=8) for _ in range(num)]
    obs, info = vec.reset(seed=11)
    for single in singles:
        single.reset(seed=11)
    for _ in range(steps):
        actions = vec.sample_actions(masked=False)
        obs, rewards, terminated, truncated, info = vec.step(actions)
        for i, single in enumerate(singles):
            s_obs, s_reward, s_terminated, s_truncated, s_info = single.step(int(actions[i]))
            view = info["final_obs"] if bool(terminated[i]) else obs
            assert np.array_equal(s_obs["program"], view["program"][i].numpy())
            assert int(s_obs["position"]) == int(view["position"][i])
            assert s_reward == rewards[i].item() and s_terminated == bool(terminated[i])
            assert s_truncated == bool(truncated[i]) is False
            assert np.array_equal(s_info["action_mask"].astype(bool), info["action_mask"][i].numpy())
            if s_terminated:
                single.reset()


def test_lazy_scoring_returns_the_same_as_scoring_every_step():
    eager = SynthVecEnv("reverse", num_envs=6, mode="token", max_len=5)
    lazy = SynthVecEnv("reverse", num_envs=6, mode="token", max_len=5, lazy_scoring=True)
    eager.reset(seed=1)
    lazy.reset(seed=1)
    for _ in range(12):
        actions = eager.sample_actions(masked=False)
        one, two = eager.step(actions), lazy.step(actions)
        for a, b in zip(one[1:4], two[1:4]):
            assert torch.equal(a, b)
        assert all(torch.equal(one[4][k], two[4][k]) for k in ("solved", "program_status", "action_mask"))


def test_vector_env_equals_single_envs_program_mode_with_iterations():
    rounds = [PROGRAMS[:6], PROGRAMS[5:11], [",[>,]+[,<.]"] * 6]
    vec = SynthVecEnv("reverse", num_envs=6, max_len=16, iterations=2)
    singles = [SynthVecEnv("reverse", num_envs=1, max_len=16, iterations=2) for _ in range(6)]
    vec.reset(seed=0)
    for single in singles:
        single.reset(seed=0)
    for programs in rounds:
        actions = encode_batch(programs, 16)
        v_obs, v_rewards, v_term, v_trunc, v_info = vec.step(actions)
        for i, single in enumerate(singles):
            s_obs, s_rewards, s_term, s_trunc, s_info = single.step(actions[i : i + 1])
            assert torch.equal(s_rewards, v_rewards[i : i + 1])
            assert torch.equal(s_term, v_term[i : i + 1]) and torch.equal(s_trunc, v_trunc[i : i + 1])
            for key in v_obs:
                assert torch.equal(s_obs[key], v_obs[key][i : i + 1]), key
                assert torch.equal(s_info["final_obs"][key], v_info["final_obs"][key][i : i + 1]), key


def test_program_mode_iterations_round_trip():
    env = SynthVecEnv("reverse", num_envs=2, max_len=12, iterations=3)
    obs, _ = env.reset(seed=0)
    assert obs["round"].tolist() == [0, 0]
    wrong, right = encode_batch(["+.", ",[>,]+[,<.]"], 12)
    obs, _, terminated, truncated, info = env.step(torch.stack([wrong, wrong]))
    assert obs["round"].tolist() == [1, 1] and not terminated.any() and not truncated.any()
    assert torch.equal(obs["program"], torch.stack([wrong, wrong]))  # the agent sees its last program
    obs, _, terminated, truncated, info = env.step(torch.stack([wrong, right]))
    assert terminated.tolist() == [False, True] and truncated.tolist() == [False, False]
    assert obs["round"].tolist() == [2, 0] and info["final_obs"]["round"].tolist() == [2, 2]
    assert int(obs["program"][1].abs().sum()) == 0 and info["_final_obs"].tolist() == [False, True]
    obs, _, terminated, truncated, _ = env.step(torch.stack([wrong, wrong]))
    assert terminated.tolist() == [False, False] and truncated.tolist() == [True, False]
    assert obs["round"].tolist() == [0, 1]


@pytest.mark.parametrize("mode", ["program", "token"])
def test_determinism_under_a_seed(mode):
    def rollout(seed: int) -> list[torch.Tensor]:
        env = SynthVecEnv("reverse", num_envs=8, mode=mode, max_len=6)
        env.reset(seed=seed)
        trace = []
        for _ in range(6):
            actions = env.sample_actions()
            obs, rewards, terminated, truncated, _ = env.step(actions)
            trace += [actions, rewards, terminated, obs["program"]]
        return trace

    first, again, other = rollout(5), rollout(5), rollout(6)
    assert all(torch.equal(a, b) for a, b in zip(first, again))
    assert not all(torch.equal(a, b) for a, b in zip(first, other))


def test_config_seed_is_used_when_reset_has_none():
    a = SynthVecEnv("reverse", num_envs=4, max_len=8, seed=9)
    b = SynthVecEnv("reverse", num_envs=4, max_len=8)
    a.reset()
    b.reset(seed=9)
    assert torch.equal(a.sample_actions(), b.sample_actions())


@pytest.mark.parametrize("mode", ["program", "token"])
def test_shapes_dtypes_devices_of_every_return(mode):
    env = SynthVecEnv("add", num_envs=3, mode=mode, max_len=7)
    assert env.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    obs, info = env.reset(seed=0)
    returns = [(obs, info)]
    for _ in range(8):
        obs, rewards, terminated, truncated, info = env.step(env.sample_actions())
        returns.append((obs, info))
        for flag in (terminated, truncated):
            assert flag.shape == (3,) and flag.dtype == torch.bool and flag.device == env.device
        assert rewards.shape == (3,) and rewards.dtype == torch.float32 and rewards.device == env.device
        assert info["solved"].dtype == torch.bool and info["program_status"].dtype == torch.int8
        assert info["_final_obs"].shape == (3,) and info["_final_obs"].dtype == torch.bool
        returns.append((info["final_obs"], info))
    for obs, info in returns:
        assert set(obs) == set(env.single_observation_space.spaces)
        for key, value in obs.items():
            space = env.observation_space[key]
            assert tuple(value.shape) == space.shape and value.dtype == torch_dtype(space), key
            assert value.device == env.device
        assert env.observation_space.contains({k: v.numpy() for k, v in obs.items()})
        if mode == "token":
            assert info["action_mask"].shape == (3, 9) and info["action_mask"].dtype == torch.bool
    assert env.action_space.contains(env.sample_actions().numpy())


def test_gymnasium_make_vec_4096_program_mode_matches_oracle():
    env = gymnasium.make_vec("synthenv/reverse-v0", num_envs=4096, max_len=16)
    task = env.unwrapped.task
    pool = PROGRAMS + [task.solution] + loop_free(500, 16, seed=2)
    programs = [pool[i % len(pool)] for i in np.random.default_rng(0).permutation(4096)]
    env.reset(seed=0)
    obs, rewards, terminated, truncated, info = env.step(encode_batch(programs, 16))
    assert rewards.shape == (4096,) and rewards.device == torch.device("cpu")
    truth = {p: oracle(p, task) for p in set(programs)}
    expected = torch.tensor([truth[p].reward for p in programs], dtype=torch.float32)
    assert torch.allclose(rewards, expected, atol=1e-6, rtol=0)
    assert terminated.tolist() == [truth[p].solved for p in programs]


def test_gymnasium_make_vec_4096_token_mode_matches_oracle():
    env = gymnasium.make_vec("synthenv/reverse-v0", num_envs=4096, mode="token", max_len=6)
    task = env.unwrapped.task
    pool = [",[.,]", "+.", "", ",[-]+.", ",[>,]"] + loop_free(300, 6, seed=3)
    programs = [pool[i % len(pool)] for i in np.random.default_rng(1).permutation(4096)]
    steps = write_tokens(env.unwrapped, programs, 6)
    truth = {p: oracle(p, task) for p in set(programs)}
    ended_at = torch.full((4096,), -1)
    reward = torch.zeros(4096)
    for t, (obs, rewards, terminated, truncated, info) in enumerate(steps):
        assert rewards.shape == (4096,) and obs["program"].shape == (4096, 6) and not truncated.any()
        first = terminated & (ended_at < 0)  # later ends are new, empty programs (EOS padding)
        reward = torch.where(first, rewards, reward)
        ended_at = torch.where(first, t, ended_at)
    assert ended_at.tolist() == [min(len(p), 5) for p in programs]  # the EOS step, or the 6th token
    expected = torch.tensor([truth[p].reward for p in programs], dtype=torch.float32)
    assert torch.allclose(reward, expected, atol=1e-6, rtol=0)


def test_numpy_wrapper_round_trip():
    env = NumpyVecEnv(SynthVecEnv("reverse", num_envs=2, mode="token", max_len=4))
    obs, info = env.reset(seed=0)
    assert isinstance(obs["program"], np.ndarray) and obs["program"].dtype == np.int64
    assert env.action_masks().shape == (2, 9)
    obs, rewards, terminated, truncated, info = env.step(np.array([0, 3]))
    assert isinstance(rewards, np.ndarray) and rewards.dtype == np.float32
    assert terminated.tolist() == [True, False] and isinstance(info["final_obs"]["program"], np.ndarray)
    assert env.observation_space.contains(obs)


def test_episode_statistics_accumulate_on_device():
    env = EpisodeStatistics(SynthVecEnv("reverse", num_envs=3, max_len=12, iterations=2))
    env.reset(seed=0)
    wrong, right = encode_batch(["+.", ",[>,]+[,<.]"], 12)
    first = oracle("+.", env.unwrapped.task).reward
    _, _, _, _, info = env.step(torch.stack([right, wrong, wrong]))
    assert info["_episode"].tolist() == [True, False, False]
    assert info["episode"]["r"][0].item() == 1.0 and info["episode"]["l"][0].item() == 1
    _, _, _, _, info = env.step(torch.stack([wrong, right, wrong]))
    assert info["_episode"].tolist() == [False, True, True]
    assert info["episode"]["r"][1:].tolist() == pytest.approx([first + 1.0, 2 * first], abs=1e-6)
    assert info["episode"]["solved"][1:].tolist() == [True, False]
    stats = env.stats()
    assert stats["episodes"] == 3 and stats["success_rate"] == pytest.approx(2 / 3)
    assert stats["mean_length"] == pytest.approx(5 / 3)
    assert stats["mean_return"] == pytest.approx((1.0 + first + 1.0 + 2 * first) / 3, abs=1e-6)
    env.reset_stats()
    assert env.stats()["episodes"] == 0


@pytest.mark.cuda
@pytest.mark.parametrize("mode", ["program", "token"])
def test_cuda_env_matches_cpu_env(mode):
    """Same actions on CUDA and CPU: every return equal, every tensor on the env's device."""
    envs = {d: SynthVecEnv("reverse", num_envs=256, mode=mode, max_len=12, device=d) for d in ("cpu", "cuda")}
    assert envs["cuda"].device.type == "cuda"
    for env in envs.values():
        env.reset(seed=0)
    for _ in range(13):
        actions = envs["cpu"].sample_actions(masked=False)
        cpu = envs["cpu"].step(actions)
        gpu = envs["cuda"].step(actions.to(envs["cuda"].device))
        for a, b in zip(cpu[1:4], gpu[1:4]):
            assert b.device == envs["cuda"].device and torch.equal(a, b.cpu())
        for key, value in gpu[0].items():
            assert value.device == envs["cuda"].device and torch.equal(cpu[0][key], value.cpu()), key
