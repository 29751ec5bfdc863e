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
"""
