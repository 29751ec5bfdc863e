"""``vfl party``, ``vfl predict``, ``vfl align`` and ``vfl demo``: each party its own process.

* :mod:`vfl.federation.linear` — linear models: connect, check, train or predict, write results.
* :mod:`vfl.federation.trees` — the same for gradient-boosted trees.
* :mod:`vfl.federation.mlp` — the same for split neural networks.
* :mod:`vfl.federation.credit` — the same for the credit-scoring pipeline.
* :mod:`vfl.federation.loop` — what every family's party run does around its protocol, written once.
* :mod:`vfl.federation.demo` — every party a process on 127.0.0.1 (``vfl demo``).
* :mod:`vfl.federation.cli` — ``vfl certs``, ``vfl party``, ``vfl predict``, ``vfl align``, ``vfl demo``.

Each family's module is named by its word in :mod:`vfl.families`, whose entry names it.  What they share with ``vfl serve`` (the federation file, data, sessions, shards) is
:mod:`vfl.deploy`; the transport underneath is :mod:`vfl.transport.network` (mutual TLS 1.3).
"""
