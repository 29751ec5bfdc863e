"""Linear and logistic regression: a party's model shard, and the coordinator's shares of a shared model.

A model shard is a party's share of the trained model: its name and role
(``"feature"`` or ``"label"``), its columns and weights (the label party: also
the intercept and the label classes), and where its training started
(``initial_coef``, the label party: ``initial_intercept``) so the run can be
reproduced centrally by whoever holds every shard, and the model's data parties
(``data_parties``, in the roster's order; absent from older shards).  A one-vs-rest model
(logistic regression with three classes or more) keeps one row of weights per
class in ``coef`` and, at the label party, one ``intercept`` per class.  Shards of the two-party
format (``vfl-model-shard/1``, whose ``role`` is ``"A"`` or ``"B"``) are still
read: party A's is a feature party's, party B's the label party's.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vfl.deploy.jsonfile import read_json, write_json
from vfl.deploy.shards.fields import check_head, finite as _finite, short as _short
from vfl.errors import DataError
from vfl.parties.scaling import Standardizer

#: The shard format written; :data:`LEGACY_FORMAT` shards (two parties, roles "A" and "B") are still read.
FORMAT = "vfl-model-shard/2"
LEGACY_FORMAT = "vfl-model-shard/1"
_SHARD_ROLES = ("feature", "label")


def write_shard(path, party: str, role: str, objective: str, columns, params, fit_intercept: bool,
                fingerprint: str, classes=None, label: str | None = None, initial=None,
                scaler: Standardizer | None = None, shares=None, mean=None, data_parties=None) -> Path:
    """Write party ``party``'s model shard: its columns and weights (the label party: intercept and classes too).

    ``role`` is ``"feature"`` or ``"label"``.  ``params`` is the parameter vector
    (weights, then the intercept if fitted), or one such vector per one-vs-rest
    model (then ``coef`` is written as one row per class, ``intercept`` as a
    list); ``initial`` is where training started, in the same layout.  With
    ``scaler`` (``standardize``) the weights are for the standardized columns:
    ``standardize`` keeps the party's means and scales, ``unscaled_coef`` the weights
    for its columns in their own units and ``unscaled_offset`` the constant they add
    to the score (the model in the original units is the sum of every party's
    ``unscaled_coef . x + unscaled_offset``, plus the intercept).

    A model that stays shared (``reveal = "never"``) has no weights to write:
    ``shares`` (one :meth:`~vfl.parties.linear.shares.WeightShare.state` per model) replaces
    ``coef``, ``intercept`` and ``unscaled_coef``, and ``params`` is ignored.  ``mean``: the party's training mean
    per column (raw units), kept as ``training_mean``: the reference its explanations are taken against.
    ``data_parties``: the model's data parties, in the roster's order (the feature parties, then the label party),
    kept as ``data_parties`` (an older shard has none: it still reads).
    """
    if role not in _SHARD_ROLES:
        raise ValueError(f"a model shard's role is 'feature' or 'label', got {role!r}")
    if shares is not None:
        params = [[0.0] * len(share["values"]) for share in shares]
    rows = [[float(v) for v in row] for row in (params if np.ndim(params) == 2 else [params])]
    starts = ([[float(v) for v in row] for row in (initial if np.ndim(initial) == 2 else [initial])]
              if initial is not None else [[0.0] * len(row) for row in rows])
    one = len(rows) == 1
    n = len(columns)

    def layout(values):         # one model: as they are; one-vs-rest: one entry per class
        return values[0] if one else values

    shard = {"format": FORMAT, "party": party, "role": role, "objective": objective, "columns": list(columns),
             "coef": layout([row[:n] for row in rows]), "initial_coef": layout([row[:n] for row in starts]),
             "trained_with": fingerprint}
    if shares is not None:
        del shard["coef"]
        shard["share"] = layout([{"values": list(share["values"])} for share in shares])
    elif scaler is not None:
        unscaled, offset = scaler.unscale(np.array([row[:n] for row in rows]))
        shard.update(standardize=scaler.to_dict(), unscaled_coef=layout(unscaled.tolist()),
                     unscaled_offset=layout(offset.tolist()))
    if data_parties is not None:
        shard["data_parties"] = [str(p) for p in data_parties]
    if mean is not None:
        shard["training_mean"] = [float(v) for v in np.ravel(mean)]
    if role == "label":
        shard["fit_intercept"] = bool(fit_intercept)
        if shares is None:
            shard["intercept"] = layout([row[n] if fit_intercept else 0.0 for row in rows])
        shard["initial_intercept"] = layout([row[n] if fit_intercept else 0.0 for row in starts])
        shard["label"] = label
        shard["classes"] = list(classes or [])
        if objective == "logistic" and len(shard["classes"]) == 2:
            shard["positive_class"] = shard["classes"][1]     # what the scores and probabilities are of
    return write_json(path, shard, private=True)


def read_shard(path, party: str, role: str) -> dict:
    """Read party ``party``'s model shard, for its ``role`` (``"feature"`` or ``"label"``), and check it.

    Every field prediction uses is checked.  A two-party shard (format
    ``vfl-model-shard/1``) is returned in the current form (``party`` and ``role``).

    Raises
    ------
    DataError
        Naming the file and the field: a shard edited by hand or cut short never
        reaches the protocol (JSON admits ``NaN`` and ``Infinity``, weights may not).
    """
    shard = read_json(path, "model shard")
    if shard.get("format") == LEGACY_FORMAT and shard.get("role") in ("A", "B") and "party" not in shard:
        shard = dict(shard, format=FORMAT, party=shard["role"], role="feature" if shard["role"] == "A" else "label")
    columns = check_head(path, shard, party, role, FORMAT, "model shard")
    coef = shard.get("coef")
    if "share" in shard:
        rows = _share_rows(path, shard, len(columns) + (role == "label" and shard.get("fit_intercept") is True))
    else:
        rows = _coef_rows(path, coef, len(columns))
    if not isinstance(shard.get("trained_with"), str):
        raise DataError(f"{path}: 'trained_with' (the training settings' fingerprint) is missing")
    if shard.get("objective") not in ("linear", "logistic"):
        raise DataError(f"{path}: 'objective' must be 'linear' or 'logistic', got {_short(shard.get('objective'))}")
    if rows > 1 and shard["objective"] != "logistic":
        raise DataError(f"{path}: {rows} rows of weights, but only logistic regression has one model per class")
    if role == "label":
        if not isinstance(shard.get("fit_intercept"), bool):
            raise DataError(f"{path}: 'fit_intercept' must be true or false, got {_short(shard.get('fit_intercept'))}")
        intercept = shard.get("intercept")
        if "share" in shard:
            pass                # a shared model: the intercept is in the share
        elif rows == 1:
            _finite(path, "intercept", intercept)
        elif not isinstance(intercept, list) or len(intercept) != rows:
            raise DataError(f"{path}: 'intercept' must be a list of {rows} numbers, one per class")
        else:
            for k, value in enumerate(intercept):
                _finite(path, f"intercept[{k}]", value)
        classes = shard.get("classes")
        wanted = "the two label values" if rows == 1 else f"the {rows} label values"
        if not isinstance(classes, list) or (shard["objective"] == "logistic" and
                                             len(classes) not in ((0, 2) if rows == 1 else (rows,))):
            raise DataError(f"{path}: 'classes' must be a list of {wanted}, got {_short(classes)}")
        if "positive_class" in shard and (len(classes) != 2 or shard["positive_class"] != classes[1]):
            raise DataError(f"{path}: 'positive_class' must be the second of the two 'classes' {_short(classes)}, "
                            f"got {_short(shard['positive_class'])}")
    if "standardize" in shard:
        Standardizer.from_dict(shard["standardize"], len(columns), str(path))
    if "data_parties" in shard:
        listed = shard["data_parties"]
        if not isinstance(listed, list) or not all(isinstance(p, str) for p in listed) or party not in listed \
                or len(set(listed)) != len(listed):
            raise DataError(f"{path}: 'data_parties' must list the model's data parties once each, {party} among "
                            f"them; got {_short(listed)}")
    if "training_mean" in shard:
        mean = shard["training_mean"]
        if not isinstance(mean, list) or len(mean) != len(columns):
            raise DataError(f"{path}: 'training_mean' must be a list of {len(columns)} numbers, one per column")
        for j, value in enumerate(mean):
            _finite(path, f"training_mean[{j}]", value)
    return shard


def shard_scaler(shard: dict) -> Standardizer | None:
    """The party's standardization a (checked) model shard keeps, or None if it was trained without."""
    table = shard.get("standardize")
    return None if table is None else Standardizer.from_dict(table, len(shard["columns"]), "model shard")


def _coef_rows(path, coef, n_columns: int) -> int:
    """How many models the weights ``coef`` hold (a list of numbers: one; a list of lists: one per class)."""
    if not isinstance(coef, list):
        raise DataError(f"{path}: 'coef' must be a list of weights, got {_short(coef)}")
    nested = bool(coef) and all(isinstance(row, list) for row in coef)
    rows = coef if nested else [coef]
    if nested and len(rows) < 3:
        raise DataError(f"{path}: 'coef' has {len(rows)} rows; one row per class is for three classes or more")
    for k, row in enumerate(rows):
        for j, value in enumerate(row):
            _finite(path, f"coef[{k}][{j}]" if nested else f"coef[{j}]", value)
        if len(row) != n_columns:
            raise DataError(f"{path}: {len(row)} weights for {n_columns} columns")
    return len(rows)


def _share_rows(path, shard: dict, size: int) -> int:
    """How many models a shared model's ``share`` holds; each share must be ``size`` whole numbers (as text)."""
    share = shard["share"]
    rows = share if isinstance(share, list) else [share]
    if not rows or isinstance(share, list) and len(rows) < 3:
        raise DataError(f"{path}: 'share' must be one share, or one per class for three classes or more")
    for k, row in enumerate(rows):
        values = row.get("values") if isinstance(row, dict) else None
        if not isinstance(values, list) or len(values) != size or not all(
                isinstance(v, str) and len(v) <= 1000 and v.lstrip("-").isdigit() for v in values):
            raise DataError(f"{path}: share {k} must hold {size} whole numbers, written as text")
    return len(rows)


def shard_shares(shard: dict) -> list[list[int]]:
    """The party's share of each model (one, or one per class) of a model that stays shared."""
    share = shard["share"]
    return [[int(v) for v in row["values"]] for row in (share if isinstance(share, list) else [share])]


#: The coordinator's shard of a model that stays shared (``reveal = "never"``): its share of every party's.
COORDINATOR_FORMAT = "vfl-coordinator-shares/1"


def write_coordinator_shard(path, party: str, fingerprint: str, shares: list[dict]) -> Path:
    """The coordinator's shares of every data party's parameters, one ``{party: share}`` per model (mode 0600)."""
    return write_json(path, {"format": COORDINATOR_FORMAT, "party": party, "role": "coordinator",
                             "trained_with": fingerprint,
                             "shares": [{name: {"values": list(state["values"])} for name, state in model.items()}
                                        for model in shares]}, private=True)


def read_coordinator_shard(path, party: str) -> dict:
    """Read and check the coordinator's shard: one ``{party: list of int}`` per model, in ``shares``."""
    shard = read_json(path, "coordinator's shard")
    if shard.get("format") != COORDINATOR_FORMAT or shard.get("party") != party:
        raise DataError(f"{path} is not coordinator {party}'s shard of a shared model (party "
                        f"{_short(shard.get('party'))}, format {_short(shard.get('format'))})")
    models = shard.get("shares")
    if not isinstance(shard.get("trained_with"), str) or not isinstance(models, list) or not models:
        raise DataError(f"{path}: 'trained_with' and 'shares' (one table per model) are needed")
    for k, model in enumerate(models):
        if not isinstance(model, dict) or not all(
                isinstance(row, dict) and isinstance(row.get("values"), list) and all(
                    isinstance(v, str) and len(v) <= 1000 and v.lstrip("-").isdigit() for v in row["values"])
                for row in model.values()):
            raise DataError(f"{path}: shares[{k}] must map each party to its share, whole numbers written as text")
    return shard


def shard_models(shard: dict) -> list[list[float]]:
    """The parameter vector of each model in the shard (one, or one per class): weights, then the intercept if fitted."""
    nested = bool(shard["coef"]) and isinstance(shard["coef"][0], list)
    coefs = shard["coef"] if nested else [shard["coef"]]
    intercepts = (shard["intercept"] if nested else [shard["intercept"]]) if "intercept" in shard else None
    return [list(coef) + ([intercepts[k]] if shard.get("fit_intercept") else []) for k, coef in enumerate(coefs)]
