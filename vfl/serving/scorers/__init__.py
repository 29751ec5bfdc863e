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
"""

from __future__ import annotations

from vfl.serving.scorers import credit, linear, mlp, trees

#: A model version's round, by its share's family.
ROUNDS = {"linear": linear.score, "credit": credit.score, "trees": trees.score, "mlp": mlp.score}


def round_of(share):
    """The round function of ``share``'s family (a linear share of the credit pipeline: the scorecard's)."""
    return ROUNDS["credit" if getattr(share, "pipeline", False) else share.kind]
