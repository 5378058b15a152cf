"""The hybrid backend: exact solutions over tens of thousands of programs, injected miscompiles
caught for every solved or high-reward program, the online bound and the adaptive audit rate."""

from __future__ import annotations

import pytest
import torch

from synthenv import api, compilers, engines, ir, reference, workloads
from synthenv import tasks as task_registry
from synthenv.compilers.hybrid import HybridCompiler, HybridConfig
from synthenv.compilers.traditional import TraditionalCompiler
from synthenv.language import decode_batch, encode_batch
from synthenv.pipeline import Evaluator
from synthenv.scoring import score_outputs
from synthenv.audit import AuditStats
from synthenv.verify import AuditConfig, clopper_pearson_upper

TASKS = ("reverse", "add", "print-hello", "echo-twice")


@pytest.fixture(scope="module")
def engine():
    return engines.select("auto", torch.device("cpu"))  # native when a C compiler is present


@pytest.fixture(scope="module")
def neural():
    return compilers.get("neural")


def truth(tokens, task, engine):
    """Scores of the exact pipeline (traditional compiler, tested against the oracle elsewhere)."""
    return score_outputs(engine.run(TraditionalCompiler().compile(tokens), task, early_abort=True), task)


class CorruptCompiler:
    """A deliberately broken neural compiler: a random fraction of programs get the IR of the
    task's solution (they look solved), another fraction the IR of ``+.`` (they look wrong)."""

    def __init__(self, inner, task, length, to_solved=0.05, to_wrong=0.05, seed=0):
        self.inner = inner
        self.good = TraditionalCompiler().compile(encode_batch([task.solution], length))
        self.bad = TraditionalCompiler().compile(encode_batch(["+."], length))
        self.to_solved, self.to_wrong = to_solved, to_wrong
        self.generator = torch.Generator().manual_seed(seed)
        self.corrupted = torch.zeros(0, dtype=torch.bool)

    def compile_checked(self, tokens):
        program, consistent = self.inner.compile_checked(tokens)
        draw = torch.rand(tokens.shape[0], generator=self.generator)
        solved, wrong = draw < self.to_solved, (draw >= self.to_solved) & (draw < self.to_solved + self.to_wrong)
        fields = {}
        for name in ("code", "num_ops", "balanced", "lengths"):
            value = getattr(program, name).clone()
            value[solved] = getattr(self.good, name)[0]
            value[wrong] = getattr(self.bad, name)[0]
            fields[name] = value
        corrupt = ir.Program(**fields)
        self.corrupted = (solved | wrong) & ~ir.equal(corrupt, program)  # a solution given its own IR is fine
        return corrupt, torch.ones_like(consistent)  # never flags itself

    def compile(self, tokens):
        return self.compile_checked(tokens)[0]


def test_registered_and_used_by_the_evaluator(engine):
    hybrid = compilers.get("hybrid")
    assert isinstance(hybrid, HybridCompiler) and isinstance(hybrid, compilers.Compiler)
    assert not isinstance(hybrid, compilers.Pipeline)
    evaluator = Evaluator.create("hybrid", "auto")
    hybrid = evaluator.backend  # each get() builds a fresh instance with its own audit state
    assert isinstance(hybrid, HybridCompiler) and hybrid.audit.steps == 0
    assert evaluator.audit is hybrid.audit  # the pipeline's audit stage
    tokens = encode_batch([",[>,]+[,<.]", ",[>,]<[.<]", "+."], 20)
    evaluation = evaluator.evaluate(tokens, task_registry.get("reverse"))
    assert hybrid.audit.steps == 1 and evaluation.audit == hybrid.audit.stats
    assert isinstance(evaluation.audit, AuditStats) and evaluation.audit.audited >= 1  # the solved one, at least
    assert evaluation.scores.solved.tolist() == [True, False, False]
    assert evaluator.execute(tokens, task_registry.get("reverse")).status.shape == (3, 16)
    assert hybrid.audit.steps == 2  # execute() audits too
    assert Evaluator.create("traditional", "auto").audit is None


def test_no_mismatch_on_solved_programs(neural, engine):
    # Tens of thousands of near-solutions (many solve their task) and uniform programs.
    hybrid = HybridCompiler(HybridConfig(seed=1), neural=neural)
    checked_solved, oracle_checked = 0, 0
    for i, name in enumerate(TASKS):
        task = task_registry.get(name)
        for workload, num in (("near", 4000), ("uniform", 2000)):
            tokens = workloads.make(workload, num, 100, seed=100 + i) if workload == "uniform" else \
                workloads.near(num, 100, torch.Generator().manual_seed(i), task_names=[name])
            _, scores = Evaluator(hybrid, engine)(tokens, task)
            expected = truth(tokens, task, engine)
            assert torch.equal(scores.solved, expected.solved)
            matters = expected.solved | (expected.rewards >= hybrid.config.reward_threshold)
            assert torch.equal(scores.rewards[matters], expected.rewards[matters])
            checked_solved += int(expected.solved.sum())
            # End to end against the oracle for a few solved programs.
            rows = expected.solved.nonzero().squeeze(1)[:10]
            for code in decode_batch(tokens[rows]):
                assert reference.score_program(code, task.cases, task.base, task.max_steps).solved
                oracle_checked += 1
    assert checked_solved > 4000 and oracle_checked > 0
    assert hybrid.audit.monitor.total_trials > 0


@pytest.mark.parametrize("to_solved, to_wrong", [(0.05, 0.05), (0.3, 0.0), (0.0, 0.2)])
def test_injected_miscompiles_never_reach_a_solution(neural, engine, to_solved, to_wrong):
    task = task_registry.get("reverse")
    corrupt = CorruptCompiler(neural, task, 100, to_solved, to_wrong)
    hybrid = HybridCompiler(HybridConfig(audit=AuditConfig(window_steps=0), seed=2), neural=corrupt)
    generator = torch.Generator().manual_seed(3)
    corrupted_total, programs = 0, 0
    for step in range(4):
        tokens = workloads.near(1500, 100, generator, task_names=["reverse"])
        _, scores = Evaluator(hybrid, engine)(tokens, task)
        expected = truth(tokens, task, engine)
        corrupted_total += int(corrupt.corrupted.sum())
        programs += tokens.shape[0]
        # Every reported solution and every reported reward above the threshold is exact.
        assert torch.equal(scores.solved & ~expected.solved, torch.zeros_like(scores.solved))
        high = scores.solved | (scores.rewards >= hybrid.config.reward_threshold)
        assert torch.equal(scores.rewards[high], expected.rewards[high])
        # A program corrupted to look solved is always caught and corrected.
        assert not (corrupt.corrupted & scores.solved & ~expected.solved).any()
    stats = hybrid.stats
    rate = corrupted_total / programs  # about to_solved + to_wrong, less the programs already equal to the IR
    assert stats.corrected_total > 0
    assert stats.sampled_miscompiles > 0
    # The bound is an upper bound on the observed sample rate, which is near the injected rate.
    observed = stats.sampled_miscompiles / stats.sampled
    assert stats.miscompile_bound >= observed
    assert abs(observed - rate) < 0.03
    assert not stats.bound_met
    assert hybrid.audit.rate == stats.audit_rate == 1.0  # far above epsilon: audit everything allowed
    assert corrupted_total > 0


def test_missed_low_reward_miscompiles_are_bounded_not_hidden(neural, engine):
    # Corruptions that make programs look wrong are only caught when sampled: with rho = 1
    # (max_rate = min_rate = 1) every one is caught and rewards are exact everywhere.
    task = task_registry.get("reverse")
    corrupt = CorruptCompiler(neural, task, 100, 0.0, 0.2)
    config = HybridConfig(audit=AuditConfig(min_rate=1.0, max_rate=1.0))
    hybrid = HybridCompiler(config, neural=corrupt)
    tokens = workloads.near(3000, 100, torch.Generator().manual_seed(4), task_names=["reverse"])
    _, scores = Evaluator(hybrid, engine)(tokens, task)
    assert torch.equal(scores.rewards, truth(tokens, task, engine).rewards)
    assert hybrid.stats.corrected == hybrid.stats.corrected_total == int(corrupt.corrupted.sum())


def test_bound_falls_and_rate_adapts_with_a_correct_compiler(neural, engine):
    config = HybridConfig(audit=AuditConfig(epsilon=0.01, window_steps=0, horizon_steps=2, min_rate=0.02))
    hybrid = HybridCompiler(config, neural=neural)
    task = task_registry.get("reverse")
    bounds, rates = [], []
    for step in range(8):
        tokens = workloads.make("uniform", 500, 100, seed=step)
        Evaluator(hybrid, engine)(tokens, task)
        bounds.append(hybrid.stats.miscompile_bound)
        rates.append(hybrid.stats.audit_rate)
    assert hybrid.audit.monitor.total_failures == 0
    assert all(a >= b for a, b in zip(bounds, bounds[1:]))  # no failures: the bound only falls
    assert bounds[-1] == pytest.approx(clopper_pearson_upper(0, hybrid.audit.monitor.trials, 0.05))
    assert bounds[-1] <= 0.01 and hybrid.stats.bound_met
    assert rates[0] == pytest.approx(299 / (500 * 2))  # 299 samples needed for epsilon = 1 %
    assert rates[-1] == 0.02  # enough evidence: down to the floor


def test_stats_and_tensorboard(neural, engine):
    hybrid = HybridCompiler(neural=neural)
    assert hybrid.stats.miscompile_bound == 1.0  # nothing sampled yet
    Evaluator(hybrid, engine)(workloads.make("uniform", 200, 50, seed=0), task_registry.get("add"))

    class Writer:
        def __init__(self):
            self.rows = []

        def add_scalar(self, tag, value, step):
            self.rows.append((tag, value, step))

    writer = Writer()
    hybrid.stats.write(writer, 7)
    tags = {tag for tag, _, _ in writer.rows}
    assert {"verify/miscompile_bound", "verify/audit_rate", "verify/sampled", "verify/corrected_total"} <= tags
    assert all(isinstance(v, float) and step == 7 for _, v, step in writer.rows)
    assert dict((t, v) for t, v, _ in writer.rows) == hybrid.stats.as_scalars()


def test_empty_batch(neural, engine):
    hybrid = HybridCompiler(neural=neural)
    execution, scores = Evaluator(hybrid, engine)(torch.zeros((0, 10), dtype=torch.int64), task_registry.get("add"))
    assert scores.rewards.shape == (0,) and hybrid.audit.steps == 0 and hybrid.audit.monitor.total_trials == 0


def test_score_api_with_hybrid():
    result = api.score([",[>,]+[,<.]", ",[>,]<[.<]"], "reverse", backend="hybrid", engine="torch")
    assert result.solved.tolist() == [True, False]
    assert result.rewards.tolist() == [1.0, -0.03125]


def test_env_info_carries_the_audit_statistics():
    from synthenv.env import SynthVecEnv

    env = SynthVecEnv("reverse", num_envs=32, backend="hybrid", max_len=20, seed=0)
    assert env.audit_stats() == AuditStats(epsilon=0.001, delta=0.05)  # nothing audited yet
    env.reset(seed=0)
    _, _, _, _, info = env.step(env.sample_actions())
    stats = info["audit"]
    assert isinstance(stats, AuditStats) and stats == env.audit_stats()
    assert 0.0 <= stats.miscompile_bound <= 1.0 and stats.sampled > 0 and stats.steps == 1
    assert stats.as_scalars()["verify/sampled"] == float(stats.sampled)
    other = SynthVecEnv("reverse", num_envs=8, backend="hybrid", max_len=20, seed=0)
    assert other.evaluator.backend is not env.evaluator.backend  # each env keeps its own audit
    assert "audit" not in SynthVecEnv("reverse", num_envs=2, max_len=5).reset(seed=0)[1]
    plain = SynthVecEnv("reverse", num_envs=2, max_len=5)
    plain.reset(seed=0)
    assert "audit" not in plain.step(plain.sample_actions())[4] and plain.audit_stats() is None


def test_single_env_with_the_hybrid_steps_and_reports_the_audit():
    """SynthEnv(backend="hybrid") used to crash on its first step (value[0] on a float stat)."""
    from synthenv.env import SynthEnv

    env = SynthEnv("reverse", backend="hybrid", max_len=4)
    env.reset(seed=0)
    for token in (8, 7, 0):  # ",." then EOS: the program ends and is scored (and audited)
        _, _, terminated, _, info = env.step(token)
    assert terminated and isinstance(info["audit"], AuditStats) and info["audit"].steps >= 1
