"""``vfl party``, ``vfl predict``, ``vfl align`` and ``vfl demo``: each party its own process.

* :mod:`vfl.federation.runner` — linear models: connect, check, train or predict, write results.
* :mod:`vfl.federation.boosting` — the same for gradient-boosted trees.
* :mod:`vfl.federation.mlp` — the same for split neural networks.
* :mod:`vfl.federation.pipeline` — the same for the credit-scoring pipeline.
* :mod:`vfl.federation.demo` — every party a process on 127.0.0.1 (``vfl demo``).
* :mod:`vfl.federation.cli` — ``vfl certs``, ``vfl party``, ``vfl predict``, ``vfl align``, ``vfl demo``.

What they share with ``vfl serve`` (the federation file, data, sessions, shards) is
:mod:`vfl.deploy`; the transport underneath is :mod:`vfl.transport.network` (mutual TLS 1.3).
"""
