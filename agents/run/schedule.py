"""The trainer's schedule: which members of a job write programs at each step.

A member *runs* until it is known to have solved the task (seen at a sync point, when the job stops
on success) or its NPE budget has no room for another step's programs (counted on the host, so that
no step waits for the device); the first step always runs. Of the running members, an algorithm
whose members can sit a step out (``generation_costs``, ``set_stepping``) gets its time shared: a
member whose generation costs c times the cheapest running member's steps once every c / cheapest
steps, so a cheap phase of one seed is not held up by a dear phase of another's (the default agent's
elitist phase beside its islands). The schedule changes when a member's generations run, never what
they do: each member counts its own.

>>> schedule = Schedule(num_members=2, npe=10)
>>> schedule.running(step=0, new=4)
[True, True]
>>> schedule.stepping(step=1, running=[True, True], costs=[1, 4]), schedule.stepping(4, [True, True], [1, 4])
([True, False], [True, True])
"""

from __future__ import annotations


class Schedule:
    """Host bookkeeping of S members: programs counted, finished, and who steps next."""

    def __init__(self, num_members: int, npe: int | None):
        self.npe = npe
        self.programs = [0] * num_members
        """Programs each member has written while running (the host's NPE count; on the device the count stops
        at the solving step, here it runs on to the next sync point)."""
        self.finished = [False] * num_members
        """Members known to have solved the task (at a sync point), when that stops them."""

    def running(self, step: int, new: int) -> list[bool]:
        """Members not known to be done whose budget has room for ``new`` more programs (all at step 0)."""
        return [not done and (self.npe is None or count + new <= self.npe or step == 0)
                for count, done in zip(self.programs, self.finished)]

    @staticmethod
    def stepping(step: int, running: list[bool], costs: list[int]) -> list[bool]:
        """The running members that step at ``step``, their time shared by their generations' ``costs``."""
        cheapest = min((cost for cost, run in zip(costs, running) if run), default=1)
        return [run and step % max(1, cost // cheapest) == 0 for run, cost in zip(running, costs)]

    def count(self, stepped: list[bool], new: int) -> None:
        """Add ``new`` programs to each member that stepped."""
        self.programs = [count + new * bool(flag) for count, flag in zip(self.programs, stepped)]

    @property
    def done_programs(self) -> int:
        """Programs of the least advanced member still running (of all members, once none runs)."""
        counts = [count for count, done in zip(self.programs, self.finished) if not done]
        return min(counts or self.programs)

    def state_dict(self) -> dict:
        return {"programs": list(self.programs), "finished": list(self.finished)}

    def load_state_dict(self, state: dict) -> None:
        self.programs, self.finished = list(state["programs"]), [bool(f) for f in state["finished"]]
