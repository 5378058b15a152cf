"""The edit policy: the learned operator of ``ppo`` (``islands`` has none).

``editor.py`` (+ ``editor.c``) is the policy: it reads a program and its per-case test feedback and writes
edits, from the distribution of ``distribution.py`` (its logits, the likelihood and entropy of edits); ``learner.py`` fine-tunes it on a task, by PPO on its variants' gains and by imitation of the best
improving edits (its rollout and imitation queue); ``losses.py`` and ``optim.py`` are the loss pieces and the
per-member Adam; ``files.py`` reads and writes policy files (``edit_policy.pt`` is the shipped one, written by
``synthenv pretrain``: ``agents.pretraining``).
"""
