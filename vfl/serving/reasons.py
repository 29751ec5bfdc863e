"""Reason codes in ``/score`` answers: the estimators' ``predict_reasons``, per id, from what a round already gives.

The label party's ``[serving] reasons = k`` (0, the default: none) adds to each
scored id's answer ``"reasons"``: the codes of its ``k`` largest contributions
toward the adverse side (``reasons_adverse``: a class, default a classifier's
second class; a regressor's ``"high"``, the default, or ``"low"``),
worst first, ranked by the estimators' own function
(:func:`vfl.runs.explained.reasons`, :func:`vfl.parties.explain.rank_reasons`):

* **linear and logistic models** (one model; the shard keeps the training mean): the label
  party's columns' contributions ``w_j (x_j - mean_j)``, computed at home; each
  feature party's total, its partial score less its model constant (the constant
  comes once per version, in its ``loaded`` answer), decrypted on its own in the
  round's one masked ``decrypt`` request; a feature party's code
  (:func:`vfl.runs.linear.reason_codes`) only where it consents in its own
  ``reason_columns`` in its ``[parties.NAME]`` table, answers by id (no private queries) and adds no
  noise — else ``"information from <party>"``;
* **trees**: the parties' exact Shapley values from the leaf masks the round
  already receives and each tree's training cover in the label party's shard
  (:func:`vfl.runs.trees.party_values`): no message of its own;
* **split networks of one feature party** (standardized, one output): the parties'
  exact Shapley values from the feature party's part the round already receives and
  its part at its training mean (sent once per version), each absent party fed its
  training mean (:func:`vfl.runs.mlp.party_values`).  With two feature parties or
  more the label party sees only the sum of their parts, and unmasking them would
  tell it more than prediction does: ``reasons`` on such a network is refused at
  start and at reload, as is any model these do not fit (one-vs-rest, a linear shard
  keeping no training mean, trees per class, trees saved without their cover, more than five parties).

The credit pipeline keeps the reasons it always gives (points, ``short``:
:class:`vfl.serving.scorers.credit.PipelineShare`), whatever ``reasons`` says.

Here is what every family shares: whether a version answers with reasons and its adverse side (:func:`check`, which
asks the share), a feature party's consent (:func:`consent`) and the ranking (:func:`ranked`); each family's
contributions, and what its parties tell each other once per version, are in its scorer (``reasons_of`` in
:mod:`vfl.serving.scorers.linear`, ``trees``, ``mlp``).
"""

from __future__ import annotations

from vfl.errors import ConfigurationError, DataError
from vfl.runs import explained


# ------------------------------------------------------------------------ at load: which versions

def wanted(share, settings) -> bool:
    """Whether rounds of ``share`` answer with reasons here (the credit pipeline gives its own: ``own_reasons``)."""
    return bool(settings.reasons) and not share.own_reasons


def check(share, settings, features, role: str) -> float:
    """The label party, at start and at every reload: the adverse side of ``share``'s reasons (+1: a higher score
    is adverse), 0.0 when none are asked; a :class:`ConfigurationError` naming the fix when ``share`` cannot give
    them (its family says: ``share.unexplained``, ``share.check_explainable``)."""
    if not wanted(share, settings):
        return 0.0
    fix = f"set reasons = 0 in party {role}'s [serving] table to serve it without reasons"
    where = f"party {role}: reasons = {settings.reasons}, but model version {share.version}"
    never = share.unexplained(len(features))
    if never:
        raise ConfigurationError(f"{where} is {never}; {fix}")
    try:
        share.check_explainable()
        return explained.adverse_sign(share.classes, settings.reasons_adverse)
    except (ConfigurationError, DataError) as exc:      # (DataError: trees saved without their training cover)
        raise ConfigurationError(f"{where} cannot give them: {exc}; {fix}") from None


def consent(share, reason_columns, role: str) -> dict:
    """A feature party's ``reason_columns`` as ``{column: code}``, every column checked against ``share``'s."""
    return explained.consented(dict(reason_columns), share.columns, role, f"model version {share.version}",
                               f"name only its own columns in its [parties.{role}] reason_columns")


# ------------------------------------------------------------------------ in a round

def ranked(result: dict, k: int, sign: float) -> list[list[str]]:
    """Each scored id's ``k`` codes toward the adverse side ``sign``, worst first (``result``: a family's
    contributions, :mod:`vfl.runs.explained`)."""
    table = explained.reasons(result, k, sign)
    return [[code for code in row if code is not None] for row in table.itertuples(index=False)]
