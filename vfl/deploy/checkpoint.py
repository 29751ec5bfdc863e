"""Per-party checkpoints (one JSON file per completed epoch) and model shards.

A checkpoint holds what the role program's ``on_epoch`` hands over (weights,
B's batch seed, C's loss curve: never a key) plus the settings fingerprint, so
a run is never resumed under other settings.  Files are written atomically
(temporary file, then rename) with mode 0600, and the last :data:`KEEP` are
kept: parties may be one epoch apart when one of them is killed, and a resumed
run restarts after the last epoch *all* of them completed.

A model shard is a party's share of the trained model: its name and role
(``"feature"`` or ``"label"``), its columns and weights (the label party: also
the intercept and the label classes), and where its training started
(``initial_coef``, the label party: ``initial_intercept``) so the run can be
reproduced centrally by whoever holds every shard.  A one-vs-rest model
(logistic regression with three classes or more) keeps one row of weights per
class in ``coef`` and, at the label party, one ``intercept`` per class.  Shards of the two-party
format (``vfl-model-shard/1``, whose ``role`` is ``"A"`` or ``"B"``) are still
read: party A's is a feature party's, party B's the label party's.
"""

from __future__ import annotations

import json
import math
import os
import re
from pathlib import Path

import numpy as np

from vfl.crypto.encoding import MAX_PARAMETER
from vfl.errors import ConfigurationError, DataError
from vfl.parties.scaling import Standardizer

KEEP = 3
_NAME = re.compile(r"^epoch-(\d{6})\.json$")


def write_json(path, obj, private: bool = True) -> Path:
    """Write ``obj`` as JSON atomically; ``private`` files get mode 0600."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "w") as f:
        json.dump(obj, f, indent=1, allow_nan=False)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def read_json(path, what: str) -> dict:
    """The JSON object in ``path`` (a model shard, a checkpoint): every shard and checkpoint is read here.

    A missing file is a :class:`ConfigurationError`; a file that is not JSON, or
    whose nesting is too deep for the parser (no file vfl writes nests more than
    a few levels), a :class:`DataError` naming it.
    """
    try:
        with open(path) as f:
            obj = json.load(f)
    except FileNotFoundError:
        raise ConfigurationError(f"the {what} {path} does not exist") from None
    except RecursionError:
        raise DataError(f"cannot read the {what} {path}: its JSON nests too deeply to be read (no file vfl writes "
                        "nests more than a few levels; the file is corrupt, or not one of vfl's)") from None
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read the {what} {path}: {exc}") from None
    if not isinstance(obj, dict):
        raise DataError(f"the {what} {path} is not a JSON object")
    return obj


class CheckpointStore:
    """Checkpoints of one role in ``folder``.

    Parameters
    ----------
    folder : path
    role : str
    fingerprint : str
        The shared-settings fingerprint; checkpoints of other settings are refused.
    """

    def __init__(self, folder, role: str, fingerprint: str):
        self.folder = Path(folder)
        self.role = role
        self.fingerprint = fingerprint

    def save(self, epoch: int, state: dict) -> Path:
        path = write_json(self.folder / f"epoch-{epoch:06d}.json",
                          {"role": self.role, "epoch": int(epoch), "fingerprint": self.fingerprint, "state": state})
        for old in self.epochs()[:-KEEP]:
            (self.folder / f"epoch-{old:06d}.json").unlink(missing_ok=True)
        return path

    def epochs(self) -> list[int]:
        if not self.folder.is_dir():
            return []
        return sorted(int(m.group(1)) for p in self.folder.iterdir() if (m := _NAME.match(p.name)))

    def load(self) -> dict[int, dict]:
        """``{epoch: state}`` of every kept checkpoint."""
        states = {}
        for epoch in self.epochs():
            saved = read_json(self.folder / f"epoch-{epoch:06d}.json", "checkpoint")
            if saved.get("role") != self.role or saved.get("epoch") != epoch:
                raise DataError(f"checkpoint {epoch} in {self.folder} is not party {self.role}'s")
            if saved.get("fingerprint") != self.fingerprint:
                raise ConfigurationError(
                    f"party {self.role}: the checkpoints in {self.folder} were made with other settings; "
                    "run without --resume to start afresh")
            states[epoch] = saved["state"]
        return states

    def clear(self) -> None:
        for epoch in self.epochs():
            (self.folder / f"epoch-{epoch:06d}.json").unlink(missing_ok=True)


#: The shard format written; :data:`LEGACY_FORMAT` shards (two parties, roles "A" and "B") are still read.
FORMAT = "vfl-model-shard/2"
LEGACY_FORMAT = "vfl-model-shard/1"
_SHARD_ROLES = ("feature", "label")


def write_shard(path, party: str, role: str, objective: str, columns, params, fit_intercept: bool,
                fingerprint: str, classes=None, label: str | None = None, initial=None,
                scaler: Standardizer | None = None, shares=None) -> Path:
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
    ``coef``, ``intercept`` and ``unscaled_coef``, and ``params`` is ignored.
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
    if shard.get("format") != FORMAT or shard.get("party") != party:
        raise DataError(f"{path} is not party {party}'s model shard (party {_short(shard.get('party'))}, "
                        f"format {_short(shard.get('format'))})")
    if shard.get("role") != role:
        raise DataError(f"{path} is the model shard of a {_short(shard.get('role'))} party; party {party} is the "
                        f"{role} party of this federation")
    columns, coef = shard.get("columns"), shard.get("coef")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise DataError(f"{path}: 'columns' must be a list of column names, got {_short(columns)}")
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


def _finite(path, field: str, value) -> None:
    """A model parameter: a finite number within :data:`~vfl.crypto.encoding.MAX_PARAMETER`, else a DataError."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise DataError(f"{path}: {field} must be a finite number, got {_short(value)}")
    if abs(value) > MAX_PARAMETER:
        raise DataError(f"{path}: {field} = {value:.6g} is beyond the range of a model parameter (|value| <= 2**256 "
                        "= 1.16e77): no training gives it, and every row's score would leave the range the protocol "
                        "can encode; the shard is corrupt")


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def shard_models(shard: dict) -> list[list[float]]:
    """The parameter vector of each model in the shard (one, or one per class): weights, then the intercept if fitted."""
    nested = bool(shard["coef"]) and isinstance(shard["coef"][0], list)
    coefs = shard["coef"] if nested else [shard["coef"]]
    intercepts = (shard["intercept"] if nested else [shard["intercept"]]) if "intercept" in shard else None
    return [list(coef) + ([intercepts[k]] if shard.get("fit_intercept") else []) for k, coef in enumerate(coefs)]


# -- gradient-boosting shards ----------------------------------------------------------------------

#: The format of a gradient-boosting model shard.
BOOSTING_FORMAT = "vfl-boosting-shard/1"


def write_boosting_shard(path, party, role: str, fingerprint: str, label: str | None = None,
                         feature_parties=(), n_iter: int = 0, validation_scores=()) -> Path:
    """Write a boosting party's shard: its columns, its own bin thresholds and its share of every tree.

    A feature party's shard holds, per tree it took part in, the tree's shape and
    its own splits (``[node, column, bin, missing_left]``: rows with
    ``x <= thresholds[column][bin]``, and missing values if ``missing_left``, go
    left).  The label party's holds the loss, classes, baseline and, per tree, the
    shape, the owner of every split (an index into ``data_parties``), the leaf
    values, the split gains, its own splits and, for each feature party's split,
    that party's column index.  No party's shard holds another's thresholds.
    """
    shard = {"format": BOOSTING_FORMAT, "party": party.role, "role": role, "columns": list(party.columns),
             "binning": party.binner.to_dict(), "trained_with": fingerprint}
    if role == "feature":
        shard["trees"] = party.state()["trees"]
    else:
        state = party.state()
        shard.update(label=label, data_parties=[*feature_parties, party.role], loss=state["loss"],
                     classes=[] if party.classes is None else [_plain(c) for c in party.classes],
                     baseline=state["baseline"], n_iter=int(n_iter), trees=state["trees"],
                     validation_scores=[float(v) for v in validation_scores])
    return write_json(path, shard, private=True)


def read_boosting_shard(path, party: str, role: str) -> dict:
    """Read and check party ``party``'s boosting shard (``role``: ``"feature"`` or ``"label"``).

    Raises
    ------
    DataError
        Naming the file and the field, for a shard that is not this party's, or
        whose trees, splits, thresholds or values do not hold together.
    """
    from vfl.parties.binning import Binner
    from vfl.parties.trees import Tree, check_shape, loss_from_dict
    from vfl.errors import ProtocolError

    shard = read_json(path, "model shard")
    if shard.get("format") != BOOSTING_FORMAT or shard.get("party") != party:
        raise DataError(f"{path} is not party {party}'s gradient-boosting shard (party {_short(shard.get('party'))}, "
                        f"format {_short(shard.get('format'))})")
    if shard.get("role") != role:
        raise DataError(f"{path} is the model shard of a {_short(shard.get('role'))} party; party {party} is the "
                        f"{role} party of this federation")
    columns = shard.get("columns")
    if not isinstance(columns, list) or not all(isinstance(c, str) for c in columns):
        raise DataError(f"{path}: 'columns' must be a list of column names, got {_short(columns)}")
    if not isinstance(shard.get("trained_with"), str):
        raise DataError(f"{path}: 'trained_with' (the training settings' fingerprint) is missing")
    try:
        binner = Binner.from_dict(shard["binning"])
        if len(binner.thresholds_) != len(columns) or any(
                not np.all(np.isfinite(t)) or np.any(np.diff(t) <= 0) for t in binner.thresholds_):
            raise ValueError("thresholds must be ascending finite numbers, one list per column")
        trees = shard["trees"]
        if not isinstance(trees, list):
            raise ValueError("'trees' must be a list")
        if role == "label":
            loss_from_dict(shard["loss"])
            parties = shard.get("data_parties")
            if not isinstance(parties, list) or not parties or parties[-1] != party:
                raise ValueError("'data_parties' must list the feature parties, then this party")
        for i, tree in enumerate(trees):
            shape = Tree.from_dict(tree["tree"]) if role == "label" else tree
            left, right = check_shape(shape["left"] if role == "feature" else shape.left,
                                      shape["right"] if role == "feature" else shape.right, f"tree {i}")
            for split in tree["splits"]:
                node, column, bin_, missing_left = split
                if not (isinstance(missing_left, bool) and 0 <= node < len(left) and left[node] >= 0
                        and 0 <= column < len(columns) and 0 <= bin_ < binner.n_bins_[column]):
                    raise ValueError(f"tree {i}: split {_short(split)} does not fit its tree and columns")
            if role == "label" and (not np.all(np.abs(shape.value) <= MAX_PARAMETER)
                                    or len(shape.owner) != len(left)
                                    or shape.owner.max() >= len(parties) or shape.owner.min() < -1):
                raise ValueError(f"tree {i}: leaf values must be finite numbers within 2**256 and owners data "
                                 "parties")
    except (KeyError, TypeError, ValueError, ProtocolError) as exc:
        raise DataError(f"{path}: not a valid gradient-boosting shard: {exc}") from None
    return shard


def boosting_party(shard: dict, features, role: str):
    """The party a (checked) shard describes, holding ``features`` (its rows to score) binned with its thresholds."""
    from vfl.parties.binning import Binner
    from vfl.parties.trees import Tree, loss_from_dict
    from vfl.parties.trees.feature_party import BoostingFeatureParty
    from vfl.parties.trees.label_party import BoostingLabelParty

    binner = Binner.from_dict(shard["binning"])
    if shard["role"] == "feature":
        party = BoostingFeatureParty(features, role, shard["columns"], binner=binner)
        party.load_state({"trees": shard["trees"]})
        return party
    party = BoostingLabelParty(features, None, role, shard["columns"], binner=binner)
    party.trees = [{"tree": Tree.from_dict(t["tree"]),
                    "splits": {int(s[0]): (int(s[1]), int(s[2]), bool(s[3])) for s in t["splits"]},
                    "foreign": {int(n): int(c) for n, c in t["foreign"]}} for t in shard["trees"]]
    party.baseline = np.asarray(shard["baseline"], dtype=np.float64)
    party.loss = loss_from_dict(shard["loss"])
    party.classes = np.asarray(shard["classes"], dtype=object) if shard["classes"] else None
    return party


def _plain(value):
    return value.item() if hasattr(value, "item") else value
