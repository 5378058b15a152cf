"""What a run leaves for the next one: its improving edits and its solution, and a fine-tuned edit policy.

At the end of a run that logs (``log_dir``), each member of ``islands`` or ``ppo`` writes
``{run_dir}/edits.pt``: the task (its cases, so that a task file need not be at hand later), the
best improving edits of its imitation queue (each a parent, its feedback and the edits that beat
it) and the program that solved the task, if one did. ``synthenv pretrain --from-runs DIR`` reads
every such file under DIR (``load_runs``) and adds them to its data: the edits as they are, the
solution as one more task to corrupt and repair. ``synthenv library --from-runs DIR`` adds the
solutions to a library of known programs (``run_solutions``). The files are untrusted data (read
with ``torch.load(weights_only=True)``, a bad one refused in one line).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import torch

from synthenv.checkpoint import CheckpointError, check_like, load_checkpoint, save_checkpoint
from synthenv.dialect import PQT
from synthenv.errors import UserError
from synthenv.language import COMMANDS, VOCAB_SIZE
from synthenv.tasks import Task
from synthenv.tasks.files import task_document, task_from_document

from .feedback import NUM_FEATURES
from ..search.operators import EDIT_FIELDS
from ..pretraining.repair import RepairSet
from ..search.queue import ProgramQueue
from ..search.variation import NUM_KINDS, Edits

FORMAT = "synthenv-run-data"
VERSION = 1
FILE_NAME = "edits.pt"
FIX = "pass folders of runs written by synthenv train (islands or ppo, with logs)"


def save_run_data(path: str | os.PathLike, task: Task, imitation: ProgramQueue | None, member: int,
                  solution: str | None) -> None:
    """Member ``member``'s rows of the ``imitation`` queue (its valid ones; none without one: an agent with no edit
    policy) and its ``solution`` to ``path``."""
    if imitation is None:
        empty = torch.zeros((0, 1), dtype=torch.int64)
        parents, features = empty, torch.zeros((0, NUM_FEATURES))
        edits = {name: torch.zeros((0, 1), dtype=torch.bool if name == "active" else torch.int64)
                 for name in EDIT_FIELDS}
    else:
        valid = imitation.valid[member]
        rows = lambda name: imitation.extras[name][member][valid].cpu()  # noqa: E731
        parents, features = rows("parents"), rows("features")
        edits = {name: rows(f"edit_{name}") for name in EDIT_FIELDS}
    save_checkpoint(path, {"format": FORMAT, "version": VERSION, "solution": solution or "",
                           "task": task_document(task), "parents": parents, "features": features, "edits": edits})


def load_run_data(path: str | os.PathLike, max_len: int) -> tuple[RepairSet, Task, str | None]:
    """One file: its improving edits (as repair examples of width ``max_len``), its task and its solution."""
    state = _read(path, "task", "parents", "edits")
    task = _task(state["task"], path)
    parents, features, stored = state["parents"], state.get("features"), state["edits"]
    if not all(isinstance(t, torch.Tensor) for t in (parents, features)) or not isinstance(stored, dict) or \
            not all(isinstance(stored.get(name), torch.Tensor) for name in EDIT_FIELDS):
        raise CheckpointError(f"{str(path)!r}: 'parents', 'features' and each of 'edits' ({', '.join(EDIT_FIELDS)}) "
                              f"must be tensors; {FIX}")
    if parents.dim() != 2 or features.shape != (parents.shape[0], NUM_FEATURES) or parents.shape[1] > max_len:
        raise CheckpointError(f"{str(path)!r} holds programs of another shape ({tuple(parents.shape)}); {FIX}")
    template = {"parents": parents.new_zeros(parents.shape, dtype=torch.int64),
                "features": features.new_zeros(features.shape, dtype=torch.float32),
                **{name: torch.zeros(stored["active"].shape, dtype=torch.bool if name == "active" else torch.int64)
                   for name in EDIT_FIELDS}}
    check_like({"parents": parents, "features": features, **{name: stored[name] for name in EDIT_FIELDS}}, template,
               path, FIX, {"parents": (0, VOCAB_SIZE), "tokens": (0, VOCAB_SIZE), "kinds": (0, NUM_KINDS),
                           "positions": (0, parents.shape[1] + 1)})
    if stored["active"].dim() != 2 or stored["active"].shape[0] != parents.shape[0]:
        raise CheckpointError(f"{str(path)!r}: its edits are not one row per program; {FIX}")
    parents = torch.nn.functional.pad(parents, (0, max_len - parents.shape[1]))
    edits = Edits(*(stored[name] for name in EDIT_FIELDS))
    examples = RepairSet(parents, state["features"].float(), edits, torch.full((parents.shape[0],), -1))
    return examples, task, state.get("solution") or None


def _read(path: str | os.PathLike, *keys: str) -> dict:
    """A run-data file's state, refused in one line unless it is one of this version holding ``keys``."""
    state = load_checkpoint(path, map_location="cpu", required_keys=("format", *keys), fix=FIX)
    if state.get("format") != FORMAT or state.get("version") != VERSION:
        raise CheckpointError(f"{str(path)!r} is not a synthenv run-data file (version {VERSION}); {FIX}")
    return state


def run_solutions(directory: str | os.PathLike) -> list[str]:
    """The solutions of the runs under ``directory`` that solved their task, in path order."""
    root = _run_root(directory)
    solutions = []
    for path in sorted(root.rglob(FILE_NAME)):
        state = _read(path, "solution")
        if not isinstance(state["solution"], str):
            raise CheckpointError(f"{str(path)!r} is not a synthenv run-data file (version {VERSION}); {FIX}")
        if bad := next((char for char in state["solution"] if char not in COMMANDS), None):
            raise CheckpointError(f"{str(path)!r}: its solution holds {bad!r}, which is not a BF command ({COMMANDS}); "
                                  f"{FIX}")
        if state["solution"]:
            solutions.append(state["solution"])
    return solutions


def _run_root(directory: str | os.PathLike) -> Path:
    root = Path(directory)
    if not root.is_dir():
        raise FileNotFoundError(2, "No such directory (the runs to learn from, --from-runs)", str(root))
    return root


def load_runs(directory: str | os.PathLike, max_len: int) -> tuple[RepairSet | None, list[tuple[Task, str]]]:
    """Every run-data file under ``directory``: their improving edits joined (None: none), and the (task,
    solution) pairs of the runs that solved."""
    root = _run_root(directory)
    parts, solved = [], []
    for path in sorted(root.rglob(FILE_NAME)):
        examples, task, solution = load_run_data(path, max_len)
        if len(examples):
            parts.append(examples)
        if solution is not None:
            solved.append((task, solution))
    return (RepairSet.join(parts) if parts else None), solved


def _task(spec: object, path) -> Task:
    """The task a run-data file names: a task-file object, or (files before dialects) its fields with
    ``strict_syntax`` in PQT's dialect."""
    if isinstance(spec, dict) and "strict_syntax" in spec:
        brackets = "strict" if spec.get("strict_syntax") else "lenient"
        spec = {**{k: v for k, v in spec.items() if k != "strict_syntax"},
                "dialect": {**PQT.to_dict(), "brackets": brackets}}
    try:
        return task_from_document(spec, f"the task in {str(path)!r}")
    except UserError as error:
        raise CheckpointError(f"{error}; {FIX}") from None


def save_for_later(trainer, results: list) -> None:
    """What ``trainer``'s run leaves for the next: the fine-tuned policy (``policy_out``), and each seed's improving
    edits and solution in its run directory (for ``synthenv pretrain --from-runs`` and ``synthenv library
    --from-runs``), where the algorithm has them."""
    if trainer.config.policy_out:
        save_fine_tuned_policy(trainer, results)
    if hasattr(trainer.algorithm, "save_run_data"):
        for member, (result, run_dir) in enumerate(zip(results, trainer.run_dirs)):
            if run_dir is not None:
                trainer.algorithm.save_run_data(str(Path(run_dir) / FILE_NAME), trainer.task, member,
                                                result.best_program if result.solved else None)


def save_fine_tuned_policy(trainer, results: list) -> None:
    """Save to ``policy_out`` the policy of the seed whose policy was updated most, then the first to solve, then
    the best, then the first. Under a team the choice spans every rank's seeds (in seed order: each rank trains a
    contiguous share) and only the rank that trained that seed writes. # sync point (under a team)"""
    updates, team = trainer.algorithm.policy_updates(), trainer.team
    merits = [(updates[i], result.solved, -result.npe if result.solved else 0, result.best_reward)
              for i, result in enumerate(results)]
    parts = [merits] if team is None else team.all_gather_objects(merits)  # each rank's, in rank order
    every = [(rank, i, merit) for rank, part in enumerate(parts) for i, merit in enumerate(part)]
    rank, member, _ = every[max(range(len(every)), key=lambda j: (*every[j][2], -j))]
    if rank != (0 if team is None else team.rank):
        return  # another rank trained it, and saves it
    result, out = results[member], trainer.config.policy_out
    trainer.algorithm.save_policy(out, member, {"fine_tuned_on": trainer.task.name, "seed": result.seed,
                                                "solved": result.solved, "npe": result.npe, "updates": updates[member]})
    if not updates[member]:
        warnings.warn(f"--policy-out {out}: no seed's edit policy was updated (every seed solved or stopped before "
                      "its policy's first update), so the file holds the policy the run started from; to fine-tune "
                      "one, run without the elitist phase (--no-elitist) or on a task it does not solve at once",
                      stacklevel=3)
