"""The PQT paper's genetic algorithm (docs/semantics.md §4), batched over S members.

It writes fixed-length programs of ``max_len`` tokens over the eight commands (no EOS), each member with its
own generator, on the env's device. One generation per step: roulette-wheel selection of parents on fitness
``max(reward, 0) + 0.05``; consecutive parents are paired and, with probability 0.95, cut at
one uniform point and their tails swapped; every token of every child is then replaced by a
uniform command with probability 0.15 (length-preserving). The hall of fame (the 2 best
distinct programs ever seen) re-enters each new population in its last two slots: those
replays are executed again but not counted in NPE.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import torch

from synthenv.checks import require_finite_fields

from ..run.feedback import Feedback
from ..search.members import generator_states, load_generator_states, member_generators
from ..search.queue import ProgramQueue
from .random_search import uniform_commands


@dataclass(frozen=True)
class GAConfig:
    """Hyperparameters of the genetic algorithm (defaults: docs/semantics.md §4)."""

    batch_size: int = 100
    """The population: individuals per generation, programs executed per step (PQT: 100)."""
    crossover_prob: float = 0.95
    """Probability that a pair of parents is recombined by one-point crossover (PQT: 0.95)."""
    mutation_prob: float = 0.15
    """Per-token probability of replacement by a uniform command (PQT: 0.15)."""
    fitness_floor: float = 0.05
    """Roulette weight = max(reward, 0) + this (PQT: 0.05)."""
    hall_of_fame: int = 2
    """Best distinct programs carried into every new population (PQT: 2)."""

    def __post_init__(self) -> None:
        if not isinstance(self.batch_size, int) or self.batch_size < 2 or self.batch_size % 2:
            raise ValueError(f"batch_size (the population) must be an even int >= 2, got {self.batch_size!r}")
        if not isinstance(self.hall_of_fame, int) or not 0 <= self.hall_of_fame < self.batch_size:
            raise ValueError(f"hall_of_fame must be an int in [0, batch_size), got {self.hall_of_fame!r}")
        require_finite_fields(self, "crossover_prob", "mutation_prob", low=0.0, high=1.0)
        require_finite_fields(self, "fitness_floor", low=0.0, low_open=True)  # roulette weights must be positive


class GeneticAlgorithm:
    """PQT's GA over fixed-length token genomes, batched over S members.

    >>> ga = GeneticAlgorithm(GAConfig(batch_size=4, hall_of_fame=1), seeds=(0,), max_len=5,
    ...                       device=torch.device("cpu"))
    >>> first = ga.propose()
    >>> ga.select(first, torch.tensor([[0.1, 0.9, 0.2, 0.3]]))
    >>> bool((ga.propose()[0, -1] == first[0, 1]).all())  # the hall of fame re-enters
    True
    """

    def __init__(self, config: GAConfig, seeds: tuple[int, ...], max_len: int, device: torch.device):
        self.config, self.max_len, self.device = config, max_len, device
        self.programs_per_step = config.batch_size
        self.generators = member_generators(seeds, device)
        self.population = uniform_commands(self.generators, (config.batch_size, max_len), device)  # [S, P, L]
        self.fame = ProgramQueue(len(seeds), max(config.hall_of_fame, 1), max_len, device)

    def propose(self) -> torch.Tensor:
        return self.population

    def new_programs(self, step: int) -> int:
        """The first generation is all new; later ones replay the hall of fame."""
        return self.config.batch_size - (self.config.hall_of_fame if step > 0 else 0)

    def learn(self, feedback: Feedback) -> dict[str, torch.Tensor]:
        self.select(feedback.tokens, feedback.rewards)
        return {"programs/queue_best": self.fame.rewards[:, 0]}

    def select(self, tokens: torch.Tensor, rewards: torch.Tensor) -> None:
        """Breed the next population from ``tokens [S, P, L]`` and their ``rewards [S, P]``."""
        config, device = self.config, self.device
        s, p, length = tokens.shape
        self.fame.push(tokens, rewards)
        fitness = rewards.float().clamp(min=0.0) + config.fitness_floor  # [S, P]
        parents = torch.stack([torch.multinomial(w, p, replacement=True, generator=g)
                               for w, g in zip(fitness, self.generators)])  # [S, P]
        genomes = tokens.gather(1, parents[..., None].expand(-1, -1, length))  # [S, P, L]
        mothers, fathers = genomes[:, 0::2], genomes[:, 1::2]  # [S, P/2, L]
        draws = torch.stack([torch.rand((p // 2, 2), generator=g, device=device) for g in self.generators])
        cross = draws[..., 0] < config.crossover_prob  # [S, P/2]
        cut = 1 + (draws[..., 1] * (length - 1)).long()  # [S, P/2] in [1, L-1]: both parts non-empty
        head = torch.arange(length, device=device) < cut[..., None]  # [S, P/2, L]
        swap = cross[..., None] & ~head
        children = torch.cat([torch.where(swap, fathers, mothers), torch.where(swap, mothers, fathers)], dim=1)
        mutate = torch.stack([torch.rand((p, length), generator=g, device=device) for g in self.generators])
        children = torch.where(mutate < config.mutation_prob, uniform_commands(self.generators, (p, length), device),
                               children)  # [S, P, L]
        if config.hall_of_fame:
            fame = self.fame.tokens[:, : config.hall_of_fame]  # [S, F, L]
            children = torch.cat([children[:, : p - config.hall_of_fame], fame], dim=1)
        self.population = children

    def state_dict(self) -> dict:
        return {"population": self.population.clone(), "fame": self.fame.state_dict(),
                "generators": generator_states(self.generators), "config": dataclasses.asdict(self.config)}

    def load_state_dict(self, state: dict) -> None:
        self.population = state["population"].to(self.device).clone()
        self.fame.load_state_dict(state["fame"])
        load_generator_states(self.generators, state["generators"])
