"""The run: one training job, from its config to its results.

``job.py`` holds the job's settings (``TrainConfig``) and each seed's outcome (``RunResult``); ``trainer.py``
is the loop (propose, run in the program-mode env, learn), ``resume.py`` how it continues from a checkpoint
(checked against its own state first), with ``algorithm.py`` the protocol it asks of an
algorithm and ``feedback.py`` (+ ``feedback.c``) what the env reports as the agents read it; ``schedule.py``
shares the machine between members; ``tracker.py`` keeps NPE, first solves and best programs; ``logger.py``
writes TensorBoard logs and the progress bar; ``data.py`` is what a run leaves for the next (its improving
edits and solution, for ``synthenv pretrain`` and ``synthenv library --from-runs``).
"""
