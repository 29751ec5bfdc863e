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
"""

from __future__ import annotations

import json

import numpy as np

from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.parties import explain as maths
from vfl.runs import explained
from vfl.runs import linear as run_linear
from vfl.runs import mlp as run_mlp
from vfl.runs.trees import party_values


# ------------------------------------------------------------------------ at load: which versions, what is told once

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
    pairs = dict(reason_columns)
    unknown = [c for c in pairs if c not in share.columns]
    if unknown:
        raise ConfigurationError(f"party {role}: reason_columns names the column {unknown[0]!r}, which model version "
                                 f"{share.version} does not have (its columns: {list(share.columns)}); name only "
                                 f"its own columns in its [parties.{role}] reason_columns")
    return {c: pairs[c] for c in share.columns if c in pairs}


def explaining(share, consent: dict | None = None) -> run_linear.Explaining:
    """A linear share's model for its columns' contributions (standardized: the training mean is 0 in the model's
    units); ``consent``: ``{column: code}`` a feature party lets a reason name."""
    mean = share.training_mean if share.training_mean is not None else \
        share.scaler.mean if share.scaler is not None else None
    if mean is None:
        raise ConfigurationError(f"its shard of model version {share.version} keeps no training mean (written before "
                                 "vfl party kept it, without standardize), which reasons need: train the model "
                                 "again")
    return run_linear.Explaining(share.coef[0], share.scaler, np.asarray(mean, dtype=np.float64),
                                 list(share.columns), dict(consent or {}))


def constant(share) -> float:
    """A feature party's model constant: its partial score at its training mean (0 for standardized columns),
    what its total leaves out; sent once per version."""
    model = explaining(share)
    return float(model.reference() @ np.ravel(model.weights))


def part_at_mean(share, role: str) -> np.ndarray:
    """A split network's feature party: its part of the interactive layer at its training mean (one vector per
    version, what stands for it outside a coalition)."""
    scaler = getattr(share.party, "scaler", None)
    if scaler is None:
        raise ConfigurationError(f"party {role}: reasons need its part at its training mean, which a network trained "
                                 "without standardize does not keep; train with standardize = true, or set reasons "
                                 "= 0 at the label party")
    parts, ok = share.parts(np.asarray(scaler.mean, dtype=np.float64)[None, :])
    if not ok.all():
        raise ConfigurationError(f"party {role}: its part at its training mean is not finite")
    return parts[0]


def loaded_fields(answer, peer: str) -> tuple[float, list[str]]:
    """The label party: a feature party's ``constant`` and the codes it may name (``reason_names``), from its
    ``loaded`` answer."""
    value, names = answer.fields.get("constant"), answer.fields.get("reason_names")
    try:
        names = json.loads(names) if isinstance(names, str) else None
    except ValueError:
        names = None
    if not isinstance(value, float) or not np.isfinite(value) or not isinstance(names, list) or \
            not all(isinstance(n, str) and n for n in names):
        raise ProtocolError(f"{peer} answered 'load' with reasons asked without its constant and the codes it may "
                            "name")
    return value, names


def loaded_part(answer, peer: str, units: int) -> tuple[np.ndarray, list]:
    """The label party: a split network's feature party's part at its training mean, from its ``loaded`` answer."""
    value = answer.fields.get("part_at_mean")
    if not isinstance(value, np.ndarray) or value.dtype != np.float64 or value.shape != (units,) or \
            not np.isfinite(value).all():
        raise ProtocolError(f"{peer} answered 'load' with reasons asked without its part at its training mean "
                            f"({units} numbers)")
    return value, []


# ------------------------------------------------------------------------ in a round

def feature_codes(share, values: np.ndarray, ok: np.ndarray, model, sign: float) -> np.ndarray:
    """Per id, the index of the column a consenting feature party names as its reason (-1: none, or not scored)."""
    codes = np.full(len(values), -1, dtype=np.int64)
    if ok.any():
        x = values[ok] if share.scaler is None else share.scaler.apply(values[ok])
        codes[ok] = run_linear.reason_codes(x, model, sign)[0]
    return codes


def round_codes(message, peer: str, count: int, names: list) -> np.ndarray | None:
    """The codes in a feature party's ``scores`` answer (one per id, -1 to ``len(names) - 1``), or None if it names
    none."""
    if not names:
        return None
    codes = message.fields.get("codes")
    if not isinstance(codes, np.ndarray) or codes.dtype != np.int64 or codes.shape != (count,) or \
            (count and (codes.min() < -1 or codes.max() >= len(names))):
        raise ProtocolError(f"{peer} sent a malformed 'scores' message: field 'codes' is not {count} indices of its "
                            f"{len(names)} reason codes")
    return codes


def linear(share, values: np.ndarray, totals: dict, codes: dict, k: int) -> list[list[str]]:
    """The label party's reasons of a linear round's scored ids: its own rows ``values``, each feature party's
    decrypted ``totals`` (its partial scores), and its ``codes`` (or None)."""
    model = explaining(share)
    x = share.scaler.apply(values)
    own = maths.additive_contributions(x, np.ravel(model.weights), model.reference())
    parties = {}
    for peer, total in totals.items():
        constant, names = share.feature_reasons[peer]
        parties[peer] = {"totals": np.asarray(total, dtype=np.float64) - constant, "codes": codes.get(peer),
                         "names": names}
    return _ranked(explained.explained(share.columns, own, parties, 0.0), k, share.reason_sign)


def trees(share, codes: np.ndarray, masks: dict, k: int) -> list[list[str]]:
    """The label party's reasons of a trees round's scored ids: the parties' Shapley values from its own splits'
    bin ``codes`` and the feature parties' leaf ``masks``."""
    values = party_values(share.party, codes, share.owners, masks, share.feature_parties)
    return _ranked(explained.party_level(values), k, share.reason_sign)


def network(share, values: np.ndarray, parts: np.ndarray, k: int) -> list[list[str]]:
    """The label party's reasons of a split network's scored ids (one feature party): its own rows ``values`` and
    the feature party's ``parts`` as received, each party absent fed its training mean."""
    (peer,) = share.feature_parties
    scaler = getattr(share.party, "scaler", None)
    mean = np.broadcast_to(scaler.mean if scaler is not None else np.zeros(values.shape[1]), values.shape)
    values = run_mlp.party_values(share.raw, values, mean, [(parts, share.feature_reasons[peer][0])],
                                  [share.party.role, peer])
    return _ranked(explained.party_level(values), k, share.reason_sign)


def _ranked(result: dict, k: int, sign: float) -> list[list[str]]:
    table = explained.reasons(result, k, sign)
    return [[code for code in row if code is not None] for row in table.itertuples(index=False)]
