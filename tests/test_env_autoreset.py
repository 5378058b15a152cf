"""Gymnasium's three autoreset modes (SameStep, NextStep, Disabled) in program and token mode.

Each mode is checked against a hand-written, step-by-step table of what it must return at an
episode's end and after, for a tiny env whose episodes end at known steps; against Gymnasium's
own ``SyncVectorEnv`` over the single ``SynthEnv`` (Gymnasium's reference implementation of the
modes); through Gymnasium's vector wrappers; and under the host-sync guard.
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
import tyro
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers.vector import DictInfoToList, NormalizeReward, RecordEpisodeStatistics

from synthenv import engines, reference, tasks
from synthenv.compilers.traditional import TraditionalCompiler
from synthenv.env import EnvConfig, EpisodeStatistics, NumpyVecEnv, SynthEnv, SynthVecEnv
from synthenv.language import decode_batch, encode_batch
from synthenv.pipeline import Evaluator
from synthenv.testing.syncguard import forbid_host_sync

SAME, NEXT, OFF = AutoresetMode.SAME_STEP, AutoresetMode.NEXT_STEP, AutoresetMode.DISABLED
TASK = tasks.get("reverse")
F, T = False, True


def reward_of(program: str | None) -> float:
    """The oracle's reward of a program that ended (None: no program ended, reward 0)."""
    if program is None:
        return 0.0
    return reference.score_program(program, TASK.cases, TASK.base, TASK.max_steps, TASK.dialect).reward


# ---- token mode, max_len 3: the reference tables ---------------------------------------------
# Tokens: 7 = '.', 8 = ',', 0 = EOS. The same actions in every mode; where a mode resets or
# keeps an ended env, that env's action is ignored.
TOKEN_ACTIONS = [(8, 7), (7, 0), (7, 8), (7, 7), (7, 7), (7, 7), (8, 7)]
# Per step and env: (program observed, position observed, program whose reward comes or None,
# terminated). SameStep adds the final observation (program, position) of an env that ended.
TOKEN_SAME = [
    [(",", 1, None, F), (".", 1, None, F)],
    [(",.", 2, None, F), ("", 0, ".", T, (".", 2))],  # EOS ends "." (written at position 1)
    [("", 0, ",..", T, (",..", 3)), (",", 1, None, F)],  # max_len ends ",.."
    [(".", 1, None, F), (",.", 2, None, F)],
    [("..", 2, None, F), ("", 0, ",..", T, (",..", 3))],
    [("", 0, "...", T, ("...", 3)), (".", 1, None, F)],
    [(",", 1, None, F), ("..", 2, None, F)],
]
TOKEN_NEXT = [
    [(",", 1, None, F), (".", 1, None, F)],
    [(",.", 2, None, F), (".", 2, ".", T)],  # the final observation is the observation
    [(",..", 3, ",..", T), ("", 0, None, F)],  # env 1 resets: its ',' is ignored, reward 0
    [("", 0, None, F), (".", 1, None, F)],  # env 0 resets
    [(".", 1, None, F), ("..", 2, None, F)],
    [("..", 2, None, F), ("...", 3, "...", T)],
    [("..,", 3, "..,", T), ("", 0, None, F)],
]
# Disabled: reset(options={"reset_mask": ...}) after step 4 (env 1) and after step 5 (env 0).
TOKEN_OFF = [
    [(",", 1, None, F), (".", 1, None, F)],
    [(",.", 2, None, F), (".", 2, ".", T)],
    [(",..", 3, ",..", T), (".", 2, None, T)],  # env 1 stays as it ended: reward 0, still terminated
    [(",..", 3, None, T), (".", 2, None, T)],
    [(",..", 3, None, T), (".", 1, None, F)],  # env 1 was reset after step 4
    [(".", 1, None, F), ("..", 2, None, F)],  # env 0 was reset after step 5
    [(".,", 2, None, F), ("...", 3, "...", T)],
]
OFF_RESETS = {4: ([F, T], [(",..", 3), ("", 0)]), 5: ([T, F], [("", 0), (".", 1)])}  # step -> mask, obs after


def token_env(mode, num_envs: int = 2, max_len: int = 3, **options) -> SynthVecEnv:
    return SynthVecEnv("reverse", num_envs=num_envs, mode="token", max_len=max_len, engine="torch",
                       autoreset_mode=mode, **options)


def observed(obs: dict, position_key: str) -> list[tuple[str, int]]:
    return list(zip(decode_batch(obs["program"]), obs[position_key].tolist()))


def check_row(row: list[tuple], obs, rewards, terminated, truncated, info, position_key: str) -> None:
    assert observed(obs, position_key) == [expected[:2] for expected in row]
    assert rewards.tolist() == pytest.approx([reward_of(expected[2]) for expected in row], abs=1e-6)
    assert terminated.tolist() == [expected[3] for expected in row]


@pytest.mark.parametrize("mode", [SAME, NEXT, OFF], ids=lambda m: m.value)
def test_token_mode_returns_the_reference_sequence(mode):
    table = {SAME: TOKEN_SAME, NEXT: TOKEN_NEXT, OFF: TOKEN_OFF}[mode]
    env = token_env(mode)
    assert env.metadata["autoreset_mode"] is mode and env.autoreset_mode is mode
    obs, info = env.reset(seed=0)
    for step, (actions, row) in enumerate(zip(TOKEN_ACTIONS, table), start=1):
        obs, rewards, terminated, truncated, info = env.step(torch.tensor(actions))
        check_row(row, obs, rewards, terminated, truncated, info, "position")
        assert not truncated.any() and not info["solved"].any()
        assert (info["program_status"] == 0).all()  # OK: no program here fails
        if mode is SAME:
            assert info["_final_obs"].tolist() == [expected[3] for expected in row]
            for i, expected in enumerate(row):
                if expected[3]:
                    assert observed(info["final_obs"], "position")[i] == expected[4]
        else:
            assert "final_obs" not in info and "_final_obs" not in info
            # an ended env ignores its next action: every token is legal there
            ended = torch.tensor([expected[3] for expected in row])
            assert torch.equal(info["action_mask"].all(1), ended)
            assert torch.equal(env.action_masks(), info["action_mask"])
        if mode is OFF and step in OFF_RESETS:
            mask, expected_obs = OFF_RESETS[step]
            obs, info = env.reset(options={"reset_mask": torch.tensor(mask)})
            assert observed(obs, "position") == expected_obs
            assert info["action_mask"][mask.index(True)].tolist() == [T, T, T, T, T, T, F, T, T]  # fresh


# ---- program mode, iterations 2: the reference tables -----------------------------------------
S, W, W2 = TASK.solution, "+.", ",."  # solved (terminated), two wrong programs (truncated after 2 rounds)
PROGRAM_ACTIONS = [(S, W), (W, W2), (W, S), (S, W), (W, W2)]
# Per step and env: (program observed, round observed, program scored or None, terminated, truncated).
PROGRAM_SAME = [
    [("", 0, S, T, F), (W, 1, W, F, F)],
    [(W, 1, W, F, F), ("", 0, W2, F, T)],
    [("", 0, W, F, T), ("", 0, S, T, F)],
    [("", 0, S, T, F), (W, 1, W, F, F)],
    [(W, 1, W, F, F), ("", 0, W2, F, T)],
]
PROGRAM_FINAL = {(0, 0): (S, 1), (1, 1): (W2, 2), (2, 0): (W, 2), (2, 1): (S, 1), (3, 0): (S, 1), (4, 1): (W2, 2)}
PROGRAM_NEXT = [
    [(S, 1, S, T, F), (W, 1, W, F, F)],
    [("", 0, None, F, F), (W2, 2, W2, F, T)],  # both reset: their actions are ignored
    [(W, 1, W, F, F), ("", 0, None, F, F)],
    [(S, 2, S, T, F), (W, 1, W, F, F)],  # solved in the last round: terminated, not truncated
    [("", 0, None, F, F), (W2, 2, W2, F, T)],
]
# Disabled: reset env 0 after step 2 and env 1 after step 4.
PROGRAM_OFF = [
    [(S, 1, S, T, F), (W, 1, W, F, F)],
    [(S, 1, None, T, F), (W2, 2, W2, F, T)],
    [(W, 1, W, F, F), (W2, 2, None, F, T)],
    [(S, 2, S, T, F), (W2, 2, None, F, T)],
    [(S, 2, None, T, F), (W2, 1, W2, F, F)],
]
PROGRAM_RESETS = {2: [T, F], 4: [F, T]}


@pytest.mark.parametrize("mode", [SAME, NEXT, OFF], ids=lambda m: m.value)
def test_program_mode_returns_the_reference_sequence(mode):
    table = {SAME: PROGRAM_SAME, NEXT: PROGRAM_NEXT, OFF: PROGRAM_OFF}[mode]
    env = SynthVecEnv("reverse", num_envs=2, max_len=12, iterations=2, engine="torch", autoreset_mode=mode)
    env.reset(seed=0)
    for step, (actions, row) in enumerate(zip(PROGRAM_ACTIONS, table), start=1):
        obs, rewards, terminated, truncated, info = env.step(encode_batch(list(actions), 12))
        check_row(row, obs, rewards, terminated, truncated, info, "round")
        assert truncated.tolist() == [expected[4] for expected in row]
        assert info["solved"].tolist() == [expected[2] == S for expected in row]
        for i, expected in enumerate(row):  # the per-case feedback of the round, where the mode puts it
            ended = expected[3] or expected[4]
            view = info["final_obs"] if mode is SAME and ended else obs
            shown = decode_batch(view["program"][i : i + 1])[0]
            if mode is SAME and ended:
                assert (shown, view["round"][i].item()) == PROGRAM_FINAL[step - 1, i]
            assert view["reward"][i].item() == pytest.approx(reward_of(shown), abs=1e-6)
            assert view["case_passed"][i].all().item() == (shown == S)
            if shown == "":  # a reset observation: all feedback zero
                assert view["case_rewards"][i].abs().sum().item() == 0 and view["round"][i].item() == 0
        if mode is SAME:
            assert info["_final_obs"].tolist() == [e[3] or e[4] for e in row]
        if mode is OFF and step in PROGRAM_RESETS:
            obs, _ = env.reset(options={"reset_mask": np.array(PROGRAM_RESETS[step])})  # numpy works too
            assert obs["round"].tolist() == [0 if reset else row[i][1] for i, reset in enumerate(PROGRAM_RESETS[step])]


def test_one_round_episodes_spend_every_other_step_on_a_reset_in_next_step():
    """iterations=1 (the default): every step ends every episode. NextStep then alternates
    scored steps and reset steps (reward 0, no flags); SameStep scores every step."""
    next_step = SynthVecEnv("reverse", num_envs=2, max_len=12, engine="torch", autoreset_mode=NEXT)
    same_step = SynthVecEnv("reverse", num_envs=2, max_len=12, engine="torch")
    next_step.reset(seed=0)
    same_step.reset(seed=0)
    scored = [(S, 1, S, T, F), (W, 1, W, F, T)]
    for step in range(4):
        actions = encode_batch([S, W], 12)
        obs, rewards, terminated, truncated, info = next_step.step(actions)
        row = scored if step % 2 == 0 else [("", 0, None, F, F)] * 2
        check_row(row, obs, rewards, terminated, truncated, info, "round")
        assert truncated.tolist() == [e[4] for e in row] and info["solved"].tolist() == [e[2] == S for e in row]
        _, rewards, terminated, truncated, _ = same_step.step(actions)
        assert rewards.tolist() == pytest.approx([1.0, reward_of(W)]) and (terminated | truncated).all()


# ---- Gymnasium's own implementation of the modes as the reference ----------------------------


@pytest.mark.parametrize("mode", [SAME, NEXT, OFF], ids=lambda m: m.value)
def test_token_mode_equals_gymnasium_sync_vector_env_over_single_envs(mode):
    """Random masked tokens for 40 steps; Disabled resets ended envs after each step (as a
    Gymnasium user must); every return equals SyncVectorEnv's over SynthEnv in the same mode."""
    num = 4
    ours = NumpyVecEnv(token_env(mode, num_envs=num, max_len=4))
    theirs = SyncVectorEnv([lambda: SynthEnv("reverse", max_len=4, engine="torch")] * num, autoreset_mode=mode)
    obs, info = ours.reset(seed=0)
    their_obs, their_info = theirs.reset(seed=0)
    assert np.array_equal(obs["program"], their_obs["program"])
    rng = np.random.default_rng(3)
    ends = 0
    for _ in range(40):
        masks = info["action_mask"]
        actions = np.array([rng.choice(np.flatnonzero(m)) for m in masks])
        obs, rewards, terminated, truncated, info = ours.step(actions)
        their_obs, their_rewards, their_terminated, their_truncated, their_info = theirs.step(actions)
        for key in ("program", "position"):
            assert np.array_equal(obs[key], their_obs[key]), key
        assert np.allclose(rewards, their_rewards, atol=1e-6) and np.array_equal(terminated, their_terminated)
        assert np.array_equal(truncated, their_truncated)
        if mode is SAME:
            done = info["_final_obs"]
            assert np.array_equal(done, their_info.get("_final_obs", np.zeros(num, bool)))
            for i in np.flatnonzero(done):
                assert np.array_equal(info["final_obs"]["program"][i], their_info["final_obs"][i]["program"])
        done = terminated | truncated
        ends += int(done.sum())
        if mode is OFF and done.any():
            obs, info = ours.reset(options={"reset_mask": done})
            their_obs, _ = theirs.reset(options={"reset_mask": done.copy()})
            assert np.array_equal(obs["program"], their_obs["program"])
    assert ends >= 20  # episodes of at most 4 tokens: the comparison saw many ends


# ---- Gymnasium's vector wrappers and synthenv's EpisodeStatistics -----------------------------
# A policy read from the observation, so that every mode plays the same episodes: env 0 writes
# its target's tokens one by one, env 1 another target. Token mode: ",.." ends at max_len after 3
# steps, "." + EOS after 2. Program mode: the solution (1 round), a wrong program (2 rounds).
TARGETS = {"token": [",..", "."], "program": [S, W]}
LENGTHS = {"token": (3, 2), "program": (1, 2)}


def policy(obs: dict, env_mode: str, env) -> torch.Tensor:
    if env_mode == "program":
        return encode_batch(TARGETS["program"], 12, device=env.unwrapped.device)
    targets = encode_batch(TARGETS["token"], 3)  # [2, 3], EOS-padded
    position = torch.as_tensor(obs["position"]).clamp(max=2)
    return targets.gather(1, position[:, None])[:, 0]


def make_env(env_mode: str, mode: AutoresetMode) -> SynthVecEnv:
    if env_mode == "token":
        return token_env(mode)
    return SynthVecEnv("reverse", num_envs=2, max_len=12, iterations=2, engine="torch", autoreset_mode=mode)


def expected_episodes(env_mode: str, mode: AutoresetMode, steps: int) -> list[int]:
    """Episodes each env ends in ``steps`` steps: NextStep spends one more step per episode."""
    extra = 1 if mode is NEXT else 0
    return [steps // (length + extra) for length in LENGTHS[env_mode]]


def run(env, env_mode: str, mode: AutoresetMode, steps: int, numpy: bool) -> None:
    obs, _ = env.reset(seed=0)
    for _ in range(steps):
        actions = policy(obs, env_mode, env)
        obs, rewards, terminated, truncated, info = env.step(actions.numpy() if numpy else actions)
        done = terminated | truncated
        if mode is OFF and done.any():  # the Disabled loop: reset what ended
            obs, _ = env.reset(options={"reset_mask": done})


@pytest.mark.parametrize("mode", [SAME, NEXT, OFF], ids=lambda m: m.value)
@pytest.mark.parametrize("env_mode", ["program", "token"])
def test_gymnasium_record_episode_statistics_counts_each_mode_right(env_mode, mode):
    steps = 12
    env = RecordEpisodeStatistics(NumpyVecEnv(make_env(env_mode, mode)))
    assert env.metadata["autoreset_mode"] is mode  # the wrapper reads the instance's mode
    run(env, env_mode, mode, steps, numpy=True)
    counts = expected_episodes(env_mode, mode, steps)
    assert env.episode_count == sum(counts)
    expected = sorted([(reward_of(TARGETS[env_mode][i]) * (1 if env_mode == "token" else LENGTHS[env_mode][i]),
                        LENGTHS[env_mode][i]) for i in range(2) for _ in range(counts[i])])
    got = sorted(zip(env.return_queue, env.length_queue))
    assert [length for _, length in got] == [length for _, length in expected]
    assert [r for r, _ in got] == pytest.approx([r for r, _ in expected], abs=1e-5)


@pytest.mark.parametrize("mode", [SAME, NEXT, OFF], ids=lambda m: m.value)
@pytest.mark.parametrize("env_mode", ["program", "token"])
def test_synthenv_episode_statistics_agree_with_gymnasium(env_mode, mode):
    steps = 12
    theirs = RecordEpisodeStatistics(NumpyVecEnv(make_env(env_mode, mode)))
    ours = EpisodeStatistics(make_env(env_mode, mode))
    run(theirs, env_mode, mode, steps, numpy=True)
    run(ours, env_mode, mode, steps, numpy=False)
    stats = ours.stats()
    assert stats["episodes"] == theirs.episode_count == sum(expected_episodes(env_mode, mode, steps))
    assert stats["mean_return"] == pytest.approx(float(np.mean(theirs.return_queue)), abs=1e-5)
    assert stats["mean_length"] == pytest.approx(float(np.mean(theirs.length_queue)))
    solved = [n for n, target in zip(expected_episodes(env_mode, mode, steps), TARGETS[env_mode]) if target == S]
    assert stats["success_rate"] == pytest.approx(sum(solved) / stats["episodes"])


def test_episode_statistics_ignore_an_ended_env_stepped_again_under_disabled():
    """The reference table's Disabled run: three episodes end (".", ",..", "..."), whatever the
    repeated terminated flags of the envs left ended between steps 2 and 5."""
    env = EpisodeStatistics(token_env(OFF))
    env.reset(seed=0)
    for step, actions in enumerate(TOKEN_ACTIONS, start=1):
        _, _, _, _, info = env.step(torch.tensor(actions))
        if step == 3:
            assert info["_episode"].tolist() == [T, F]  # env 1 ended at step 2 and is still ended
        if step in OFF_RESETS:
            env.reset(options={"reset_mask": torch.tensor(OFF_RESETS[step][0])})
    stats = env.stats()
    assert stats["episodes"] == 3
    assert stats["mean_return"] == pytest.approx(np.mean([reward_of(p) for p in (".", ",..", "...")]), abs=1e-6)
    assert stats["mean_length"] == pytest.approx((2 + 3 + 3) / 3)


@pytest.mark.parametrize("mode", [SAME, NEXT, OFF], ids=lambda m: m.value)
def test_gymnasium_normalize_reward_skips_exactly_the_reset_steps(mode):
    """NormalizeReward updates its return statistics on every env-step that belongs to an
    episode: all of them in SameStep and Disabled (ended envs are reset at once), all but the
    reset steps in NextStep."""
    steps = 12
    env = NormalizeReward(NumpyVecEnv(make_env("token", mode)))
    run(env, "token", mode, steps, numpy=True)
    resets = sum(steps // (length + 1) for length in LENGTHS["token"]) if mode is NEXT else 0
    assert env.return_rms.count - 1e-4 == pytest.approx(2 * steps - resets)


@pytest.mark.parametrize("mode", [SAME, NEXT], ids=lambda m: m.value)
def test_gymnasium_dict_info_to_list_sees_final_obs_only_in_same_step(mode):
    env = DictInfoToList(NumpyVecEnv(token_env(mode)))
    env.reset(seed=0)
    for actions in TOKEN_ACTIONS[:3]:
        _, _, terminated, _, infos = env.step(np.array(actions))
    assert terminated.tolist() == [T, F] and len(infos) == 2 and infos[0]["action_mask"].shape == (9,)
    if mode is SAME:
        assert [("final_obs" in info) for info in infos] == [T, F]
        assert decode_batch(torch.as_tensor(infos[0]["final_obs"]["program"][None])) == [",.."]
    else:
        assert not any("final_obs" in info for info in infos)


# ---- reset_mask ---------------------------------------------------------------------------------


@pytest.mark.parametrize("env_mode", ["program", "token"])
def test_reset_mask_resets_only_the_masked_envs(env_mode):
    env = SynthVecEnv("reverse", num_envs=4, mode=env_mode, max_len=6, iterations=3 if env_mode == "program" else 1,
                      engine="torch", autoreset_mode=OFF)
    env.reset(seed=0)
    actions = encode_batch(["+.", ",.", ",,.", ".."], 6) if env_mode == "program" else torch.tensor([7, 8, 7, 8])
    env.step(actions)
    before = {k: v.clone() for k, v in env._state.items()}
    mask = torch.tensor([F, T, F, T])
    obs, info = env.reset(options={"reset_mask": mask})
    for name, value in env._state.items():
        assert torch.equal(value[~mask], before[name][~mask]), name  # untouched
        assert torch.equal(value[mask], env._initial[name][mask]), name  # fresh
    first_tokens = actions[:, 0] if env_mode == "program" else actions  # what each env wrote first
    assert obs["program"][:, 0].tolist() == torch.where(mask, 0, first_tokens).tolist()
    env.reset(options={"reset_mask": torch.zeros(4, dtype=torch.bool)})  # all False: nothing changes
    assert all(torch.equal(env._state[k][~mask], before[k][~mask]) for k in before)


def test_reset_mask_leaves_options_unchanged_for_gymnasium_wrappers():
    env = token_env(OFF)
    env.reset(seed=0)
    options = {"reset_mask": np.array([T, F])}
    env.reset(options=options)
    assert set(options) == {"reset_mask"}  # RecordEpisodeStatistics pops it after the env returns


@pytest.mark.parametrize(("mask", "error", "message"), [
    ([True, False], TypeError, "must be a bool tensor .* got list"),
    (torch.tensor([1, 0]), ValueError, r"got dtype torch.int64 and shape \(2,\)"),
    (torch.tensor([True, False, True]), ValueError, r"shape \(2,\).*got dtype torch.bool and shape \(3,\)"),
    (np.array([1, 0]), ValueError, "numpy array of dtype int64"),
])
def test_bad_reset_masks_are_refused_and_change_nothing(mask, error, message):
    env = token_env(OFF)
    env.reset(seed=0)
    env.step(torch.tensor([7, 0]))
    before = {k: v.clone() for k, v in env._state.items()}
    with pytest.raises(error, match=message):
        env.reset(options={"reset_mask": mask})
    assert all(torch.equal(env._state[k], v) for k, v in before.items())


def test_reset_mask_needs_a_first_reset():
    with pytest.raises(RuntimeError, match="call reset\\(\\) once first"):
        token_env(OFF).reset(options={"reset_mask": torch.tensor([T, T])})


# ---- choosing the mode -------------------------------------------------------------------------


@pytest.mark.parametrize("value", [NEXT, "NextStep", "NEXT_STEP", "next_step"])
def test_the_mode_is_given_as_the_enum_its_value_or_its_name(value):
    assert EnvConfig(autoreset_mode=value).autoreset_mode is NEXT
    assert token_env(value).metadata["autoreset_mode"] is NEXT


def test_same_step_is_the_default_and_metadata_is_per_instance():
    default, other = SynthVecEnv("reverse", num_envs=2), SynthVecEnv("reverse", num_envs=2, autoreset_mode="Disabled")
    assert default.metadata["autoreset_mode"] is SAME and other.metadata["autoreset_mode"] is OFF
    assert SynthVecEnv.metadata["autoreset_mode"] is SAME  # the class default is left alone
    assert SynthVecEnv.from_config(EnvConfig(autoreset_mode="NextStep")).autoreset_mode is NEXT


@pytest.mark.parametrize("value", ["next", "same-step", 1, None])
def test_bad_modes_are_refused_with_the_valid_ones(value):
    with pytest.raises(ValueError, match=r"unknown autoreset_mode .*Valid autoreset_modes: NextStep, SameStep, "
                                         r"Disabled\..*autoreset_mode='NextStep'"):
        SynthVecEnv("reverse", num_envs=2, autoreset_mode=value)
    with pytest.raises(ValueError, match="Did you mean 'NextStep'"):
        EnvConfig(autoreset_mode="NextStp")


def test_make_vec_takes_the_mode_as_a_keyword():
    env = gymnasium.make_vec("synthenv/reverse-v0", num_envs=3, mode="token", max_len=4, autoreset_mode="NextStep")
    assert isinstance(env.unwrapped, SynthVecEnv) and env.metadata["autoreset_mode"] is NEXT
    # vector_kwargs is Gymnasium's route to its own vectorizers: over the single env it works too
    env = gymnasium.make_vec("synthenv/reverse-v0", num_envs=2, vectorization_mode="sync", max_len=4,
                             vector_kwargs={"autoreset_mode": NEXT})
    assert isinstance(env, SyncVectorEnv) and env.metadata["autoreset_mode"] is NEXT
    with pytest.raises(gymnasium.error.Error, match="only through kwargs"):  # Gymnasium's own rule
        gymnasium.make_vec("synthenv/reverse-v0", num_envs=2, vector_kwargs={"autoreset_mode": NEXT})


def test_tyro_parses_the_mode_by_value():
    config = tyro.cli(EnvConfig, args=["--autoreset-mode", "Disabled"])
    assert config.autoreset_mode is OFF


def test_the_single_env_refuses_a_mode():
    with pytest.raises(ValueError, match="never resets itself.*vector_kwargs"):
        SynthEnv("reverse", autoreset_mode="NextStep")


# ---- no host sync -----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", [SAME, NEXT, OFF], ids=lambda m: m.value)
@pytest.mark.parametrize("env_mode", ["program", "token"])
def test_every_mode_steps_with_no_host_sync(env_mode, mode):
    """The step of every mode (and Disabled's masked reset, and EpisodeStatistics) on the GPU
    path (torch compile passes, torch engine and scorer), validate_actions=False."""
    evaluator = Evaluator(TraditionalCompiler(impl="torch"), engines.get("torch"), scorer="torch")
    env = EpisodeStatistics(SynthVecEnv("reverse", num_envs=8, mode=env_mode, max_len=6, evaluator=evaluator,
                                        iterations=2 if env_mode == "program" else 1, validate_actions=False,
                                        autoreset_mode=mode))
    env.reset(seed=0)
    env.step(env.unwrapped.sample_actions())  # first step builds the lookup tables
    with forbid_host_sync(allow=("torch_engine_check",)) as guard:
        for _ in range(8):  # token mode: programs of at most 6 tokens end, get scored, restart
            _, _, terminated, truncated, _ = env.step(env.unwrapped.sample_actions())
            if mode is OFF:
                env.reset(options={"reset_mask": terminated | truncated})
    assert guard.count == 0
    assert env.stats()["episodes"] > 0
