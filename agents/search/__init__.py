"""The search: what the default agent, ``islands``, runs (and ``ppo`` with the edit policy as one more operator).

``agent.py`` is the agent, read top to bottom (``IslandAgent``: the elitist phase, the hand-over, the islands);
``config.py`` its settings. Its parts: ``mutation.py``, the elitist phase, which is also the ``mutation``
baseline; ``islands.py``, the island populations; ``generation.py``, one generation of the islands (children by
a mix of operators, kept, restarted); ``operators.py``, the child operators (random edits, crossover, idioms,
policy edits); ``variation.py`` (+ ``variation.c``), the edits and splices they make; ``library.py``, the known
programs a first generation runs; ``prior.py`` (+ ``program_prior.pt``), the program prior fresh programs and
idioms come from; ``queue.py``, the best unique programs by reward; ``rows.py`` (+ ``rows.h``), program rows
(lengths, canonical form, hashes); ``members.py``, the per-member generators and masks of a batched job.
"""
