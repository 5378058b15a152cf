"""Every float option of the configs is checked finite and in range when the config is built."""

from __future__ import annotations

import re

import pytest

from synthenv.agents import GAConfig, MutationConfig, PGConfig, PPOConfig, RandomConfig
from synthenv.cli.compiler_report import CompilerReportCommand
from synthenv.compilers.hybrid import HybridConfig
from synthenv.compilers.neural_train import TrainConfig as CompilerTrainConfig
from synthenv.verify import AuditConfig

NAN, INF = float("nan"), float("inf")

CASES = [
    (AuditConfig, "epsilon", [NAN, INF, 0.0, 1.0, -0.1], r"\(0, 1\)"),
    (AuditConfig, "delta", [NAN, INF, 0.0, 1.5], r"\(0, 1\)"),
    (AuditConfig, "min_rate", [NAN, -INF, -0.1, 1.5], r"\[0, 1\]"),
    (AuditConfig, "max_rate", [NAN, INF, 2.0], r"\[0, 1\]"),
    (CompilerTrainConfig, "lr", [NAN, INF, 0.0, -1e-3], r"\(0, inf\)"),
    (CompilerTrainConfig, "scalar_lr_scale", [NAN, INF, 0.0], r"\(0, inf\)"),
    (CompilerTrainConfig, "weight_decay", [NAN, INF, -0.1], r"\[0, inf\)"),
    (CompilerTrainConfig, "truncate_prob", [NAN, -0.5, 1.5], r"\[0, 1\]"),
    (HybridConfig, "reward_threshold", [NAN, INF, -INF], ""),
    (CompilerReportCommand, "delta", [NAN, 0.0, 1.0], r"\(0, 1\)"),
    (PPOConfig, "learning_rate", [NAN, INF, 0.0, -1e-3], r"\(0, inf\)"),
    (PPOConfig, "entropy_coef", [NAN, INF, -0.1], r"\[0, inf\)"),
    (PPOConfig, "queue_weight", [NAN, INF, -1.0], r"\[0, inf\)"),
    (PPOConfig, "pg_weight", [NAN, INF, -1.0], r"\[0, inf\)"),
    (PPOConfig, "clip_coef", [NAN, INF, 0.0], r"\(0, inf\)"),
    (PPOConfig, "max_grad_norm", [NAN, INF, 0.0], r"\(0, inf\)"),
    (PPOConfig, "risk_quantile", [NAN, 1.0, -0.1], r"\[0, 1\)"),
    (PPOConfig, "policy_fraction", [NAN, 1.5, -0.1], r"\[0, 1\]"),
    (PPOConfig, "splice_fraction", [NAN, 1.5, -0.1], r"\[0, 1\]"),
    (PPOConfig, "idiom_fraction", [NAN, 1.5, -0.1], r"\[0, 1\]"),
    (PGConfig, "learning_rate", [NAN, INF, 0.0], r"\(0, inf\)"),
    (PGConfig, "entropy_coef", [NAN, INF, -0.5], r"\[0, inf\)"),
    (PGConfig, "queue_weight", [NAN, INF, -0.5], r"\[0, inf\)"),
    (PGConfig, "baseline_decay", [NAN, 1.0, -0.1], r"\[0, 1\)"),
    (PGConfig, "rmsprop_decay", [NAN, 1.0], r"\[0, 1\)"),
    (GAConfig, "mutation_prob", [NAN, 1.5, -0.1], r"\[0, 1\]"),
    (GAConfig, "fitness_floor", [NAN, INF, 0.0], r"\(0, inf\)"),
]


@pytest.mark.parametrize(("config", "name", "values", "interval"), CASES,
                         ids=[f"{c.__name__}.{n}" for c, n, _, _ in CASES])
def test_bad_floats_are_refused_with_one_message_shape(config, name, values, interval):
    for value in values:
        where = f" in {interval}" if interval else ""
        with pytest.raises(ValueError, match=rf"^{name} must be a finite float{where}, got {re.escape(repr(value))}$"):
            config(**{name: value})
    with pytest.raises(TypeError, match=f"{name} must be a finite float"):
        config(**{name: "0.5"})
    config()  # the defaults are valid


def test_cross_field_rules_still_hold():
    with pytest.raises(ValueError, match="need min_rate <= max_rate, got min_rate=0.5 > max_rate=0.1"):
        AuditConfig(min_rate=0.5, max_rate=0.1)
    with pytest.raises(ValueError, match="warmup must be an int >= 0"):
        CompilerTrainConfig(warmup=-1)


def test_the_configs_without_float_options_have_none():
    import dataclasses

    for config in (MutationConfig, RandomConfig):
        assert not [f.name for f in dataclasses.fields(config) if f.type in (float, "float")]


def test_a_nan_entropy_coefficient_from_the_shell_is_a_one_line_error(capsys):
    from synthenv.cli import main

    assert main(["train", "--algo", "ppo", "--entropy-coef", "nan", "--no-progress", "--log-dir", "None"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("synthenv train: error: entropy_coef must be a finite float") and err.count("\n") == 1
