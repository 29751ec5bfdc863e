"""Model shards: each party's share of a trained model, one JSON file per party, one module per family.

* :mod:`~vfl.deploy.shards.fields` — the checks every shard reader shares (finite parameters, short quotes).
* :mod:`~vfl.deploy.shards.linear` — linear and logistic regression (``vfl-model-shard/2``), and the
  coordinator's shares of a model that stays shared (``vfl-coordinator-shares/1``).
* :mod:`~vfl.deploy.shards.trees` — gradient-boosted trees (``vfl-boosting-shard/1``).
* :mod:`~vfl.deploy.shards.credit` — the credit-scoring pipeline (``vfl-pipeline-shard/1``).
* :mod:`~vfl.deploy.shards.mlp` — split neural networks (``vfl-mlp-shard/1``).

Written by ``vfl party`` and the estimators' ``shards()``, read by ``vfl predict`` and ``vfl serve``.  No
party's shard holds another party's thresholds, weights or points; every reader checks each field a
prediction uses and names the file and the field it refuses.

A family's shard module may also say what the board shows of a trained shard: ``board_view(model, result)``
(``model``: the shard as the run record keeps it, ``result``: the run's summary) returns a list of views, plain
data that the run record keeps beside the shard (``view.json``, :mod:`vfl.deploy.record`) and the board draws,
each ``{"kind", "title", "id"}`` and by its kind:

* ``"table"`` — ``rows``: a list of ``{column: value}``;
* ``"tables"`` — ``tables``: a list of ``{"heading", "rows"}``, and ``note`` (a line above them, or None);
* ``"bars"`` — ``labels``, ``values``, ``chart`` (the chart's title), ``axis`` (the values' name), ``caption``;
* ``"trees"`` — ``trees``: a list of ``{"name", "nodes"}`` (index 0 the root; each node ``{"text", "left",
  "right", "leaf"/"own"}``, its children by index), of which the reader picks one; ``caption``.
"""
