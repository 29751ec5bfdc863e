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

A family's shard module may also say what the board shows of a recorded shard: ``board_view(model, result,
chosen)`` (``model``: the shard as the run record keeps it, ``result``: the record's ``result.json``,
``chosen``: the tree the reader picked) returns a list of views, plain data the board draws, each
``{"kind", "title", "id"}`` and by its kind:

* ``"table"`` — ``rows``: a list of ``{column: value}``;
* ``"tables"`` — ``tables``: a list of ``{"heading", "rows"}``, and ``note`` (a line above them, or None);
* ``"bars"`` — ``labels``, ``values``, ``chart`` (the chart's title), ``axis`` (the values' name), ``caption``;
* ``"tree"`` — ``nodes`` (index 0 the root; each ``{"text", "left", "right", "leaf"/"own"}``), ``name``, ``count``
  (the trees a reader may pick from), ``chosen`` (the one shown) and ``caption``.
"""
