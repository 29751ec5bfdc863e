"""Each family's scoring round at the label party: what it asks its peers, and how it turns their answers into
scores.

A round function takes the label party's service (:class:`vfl.serving.label.LabelService`: its links, its
private tables, its layout and the round counter), the model version's ``share``, the round's ids, the label
party's own rows and their status, the deadline and the answers to fill, one per id:

* :mod:`~vfl.serving.scorers.linear` — linear models: encrypted partial scores, summed, one masked decryption;
* :mod:`~vfl.serving.scorers.credit` — the scorecard: the linear round, each feature party's total decrypted on
  its own for the reasons;
* :mod:`~vfl.serving.scorers.trees` — trees: each feature party's leaf masks;
* :mod:`~vfl.serving.scorers.mlp` — split networks: the feature parties' masked parts of the interactive layer.

Each also reads its family's share of a model version (``load_share``).  The registry names a family's scorer
(:attr:`vfl.families.Family.scorer`): the label party runs ``config.family.module("scorer").score``, and
:func:`vfl.serving.models.load_share` asks the same module for a version's share.
"""

