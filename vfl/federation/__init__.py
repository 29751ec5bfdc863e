"""Each party its own process: federation files, CSV data, checkpoints, model shards, the commands.

* :mod:`vfl.federation.config` — ``federation.toml`` (the parties, by name and role) and the shared-settings
  fingerprint.
* :mod:`vfl.federation.data` — one party's CSV with an id column.
* :mod:`vfl.federation.checkpoint` — per-epoch checkpoints and model shards (JSON).
* :mod:`vfl.federation.runner` — connect, check, train or predict, write results.
* :mod:`vfl.federation.narration` — one line per protocol step, for learners.
* :mod:`vfl.federation.demo` — every party a process on 127.0.0.1 (``vfl demo``).
* :mod:`vfl.federation.cli` — ``vfl certs``, ``vfl party``, ``vfl predict``, ``vfl demo``.

The transport underneath is :mod:`vfl.transport.network` (mutual TLS 1.3).
"""
