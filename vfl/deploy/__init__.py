"""What running vfl as one process per party needs, below both ``vfl party`` and ``vfl serve``.

* :mod:`~vfl.deploy.config` — ``federation.toml``: the parties by name and role, each table's settings,
  the shared-settings fingerprint.
* :mod:`~vfl.deploy.serving_settings` — its ``[serving]`` table.
* :mod:`~vfl.deploy.compute` — its ``[compute]`` table (where a party's encrypted work runs).
* :mod:`~vfl.deploy.data` — one party's CSV with an id column, checked.
* :mod:`~vfl.deploy.session` — connecting: links, hellos, the checks between parties, aborts.
* :mod:`~vfl.deploy.align` — the private set intersection of the parties' ids.
* :mod:`~vfl.deploy.jsonfile` — every JSON file a party writes (atomically, mode 0600) and reads.
* :mod:`~vfl.deploy.checkpoint` — per-epoch checkpoints.
* :mod:`~vfl.deploy.shards` — the model shards, one module per family.
* :mod:`~vfl.deploy.report` — metrics lines and score files.
* :mod:`~vfl.deploy.narration` and :mod:`~vfl.deploy.progress` — one line per step, progress bars.
* :mod:`~vfl.deploy.commands` — one line per failure and the exit codes of every command.
* :mod:`~vfl.deploy.record` — each party's record of a run (``WORKDIR/runs/``), what ``vfl board`` reads.
* :mod:`~vfl.deploy.webguard` — the host check and security headers of the HTTP faces (serve, board).

Which family a federation trains is :mod:`vfl.families`' entry, read once by :mod:`~vfl.deploy.config`.
"""
