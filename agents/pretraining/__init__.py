"""Pretraining the edit policy across generated tasks: what ``synthenv pretrain`` runs and ships.

``pretrain.py`` is the command's run (``PretrainConfig``, ``pretrain``): repair examples from ``repair.py``
(corrupted solutions of generated training tasks and the edits that undo the corruption), and what runs found
(``agents.run.data``), fitted by likelihood; the policy is then judged on tasks it never saw by its repair rate
and, on parents drawn from island searches (``probes.py``), by its new-best rate beside random edits'.
"""
