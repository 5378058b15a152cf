"""The PQT paper's agents, with its hyperparameters (docs/semantics.md §4): baselines, batched over S members.

``pg.py`` is the policy-gradient family (``reinforce``, ``pqt``, ``pg-pqt``): a token policy from
``policies.py`` (the 2x35 LSTM) sampled and scored by ``sampling.py``; ``ga.py`` is the genetic algorithm and
``random_search.py`` uniform random search.
"""
