"""Model versions: each party's shard of one training, at ``MODELS/VERSION/model_NAME.json``.

Every party keeps its own folder of versions; a version is the same *name* at
every party (``models/3/model_bank.json`` at the label party,
``models/3/model_telco.json`` at telco).  The shards are the files ``vfl party``
writes, in their documented JSON formats (``vfl-model-shard/2`` for the linear
models, ``vfl-boosting-shard/1`` for trees, ``vfl-mlp-shard/1`` for split
networks, ``vfl-pipeline-shard/1`` for the credit pipeline), read with every check of batch prediction
(:func:`vfl.deploy.shards.linear.read_shard`,
:func:`~vfl.deploy.shards.trees.read_shard`, :func:`~vfl.deploy.shards.mlp.read_shard`).

What a service needs of a shard is here: :class:`LinearShare` turns rows into
this party's partial scores (:class:`PipelineShare` too, through its bins, their
coding and its weights; its label party's also into the scorecard's points, reason
codes and the drift of served rows), :class:`TreeShare` into leaf masks (a feature party)
or, with the feature parties' masks, into raw scores (the label party),
:class:`MLPShare` into this party's part of the interactive layer (a feature
party) or, with the sum of the feature parties' parts, into the network's
outputs before the output activation (the label party).  Each
says what its peers must match: the training's fingerprint (``trained_with``),
and how many values per row the parties exchange.
"""

from __future__ import annotations

import re
import threading
from pathlib import Path

import numpy as np

from vfl.errors import ConfigurationError, DataError, file_problem
from vfl.crypto import ring
from vfl.deploy.shards import mlp as mlp_shards
from vfl.deploy.shards import trees as tree_shards
from vfl.deploy.shards.linear import shard_models, shard_scaler
from vfl.deploy.report import plain
from vfl.parties.binning import Binner
from vfl.parties.credit.scorecard import Coder, ScorecardScale, flat_codes
from vfl.parties.credit.statistics import population_stability
from vfl.parties.mlp.activations import activate
from vfl.parties.scaling import Standardizer
from vfl.parties.mlp.layers import forward, layer_activations
from vfl.protocols.trees.inference import mask_widths, raw_scores, tree_owners
from vfl.deploy.serving_settings import VERSION, check_version
from vfl.families import FAMILIES


def shard_path(models: Path, version: str, party: str) -> Path:
    """Where party ``party`` keeps its shard of ``version``."""
    return Path(models) / check_version(version) / f"model_{party}.json"


def versions(models: Path, party: str) -> list[str]:
    """The versions of ``models`` holding a shard of ``party``, oldest first (numbers compare as numbers)."""
    folder = Path(models)
    if not folder.is_dir():
        return []
    found = [p.name for p in folder.iterdir() if VERSION.match(p.name) and (p / f"model_{party}.json").is_file()]
    return sorted(found, key=_natural)


def _natural(name: str):
    return [(0, int(part), "") if part.isdigit() else (1, 0, part) for part in re.split(r"(\d+)", name) if part]


def latest(models: Path, party: str) -> str:
    """The last version of ``models`` with a shard of ``party``; a :class:`ConfigurationError` if none."""
    found = versions(models, party)
    if not found:
        raise ConfigurationError(f"party {party}: no model version in {models} (expected "
                                 f"{Path(models) / 'VERSION' / f'model_{party}.json'}, e.g. copy vfl-{party}/"
                                 f"model_{party}.json to {Path(models) / '1'}/)")
    return found[-1]


class MissingVersion(ConfigurationError):
    """A party has no shard of the model version asked for."""


class LinearShare:
    """One party's shard of a linear or logistic model: its columns, weights and scaling.

    ``scores(x)`` is its partial score of every model (one, or one per class for
    one-vs-rest): ``(n, models)``; the label party's includes the intercept.
    """

    kind = "linear"
    #: whether a row with a missing value cannot be scored
    complete = True
    pipeline = False

    def __init__(self, shard: dict, version: str):
        self.version = version
        self.role = shard["role"]
        self.columns = list(shard["columns"])
        self.trained_with = shard["trained_with"]
        self.objective = shard["objective"]
        params = np.asarray(shard_models(shard), dtype=np.float64)
        m = len(self.columns)
        self.coef = params[:, :m]
        self.intercept = params[:, m] if params.shape[1] > m else np.zeros(len(params))
        self.scaler = shard_scaler(shard)
        #: the party's training mean per column (raw units; reasons measure contributions from it), or None for a
        #: shard written before ``vfl party`` kept it
        self.training_mean = np.asarray(shard["training_mean"], dtype=np.float64) if "training_mean" in shard \
            else None
        self.classes = shard.get("classes") or None
        #: values each row adds to a round: one per model
        self.width = len(params)
        #: the columns its partial scores are linear in
        self.released_columns = self.columns
        #: reasons (:mod:`vfl.serving.reasons`): the adverse side (0: none asked); the label party's: each feature
        #: party's ``(constant, codes it may name)`` from its ``loaded`` answer; a feature party's: its consenting
        #: model (:class:`vfl.runs.linear.Explaining`) where it sends codes
        self.reason_sign = 0.0
        self.feature_reasons: dict[str, tuple[float, list]] = {}
        self.reason_model = None

    def scores(self, x: np.ndarray) -> np.ndarray:
        x = x if self.scaler is None else self.scaler.apply(x)
        with np.errstate(all="ignore"):
            return x @ self.coef.T + self.intercept


class PipelineShare:
    """One party's shard of the credit pipeline: raw columns -> bins -> model columns -> partial log-odds.

    ``scores(x)`` is its partial log-odds ``(n, 1)`` (the label party's with the
    intercept), a missing value taking its column's missing bin.  The label party's
    also gives each row's scorecard points per own column (:meth:`own_points`), the
    reasons a score fell short (:meth:`reasons`), and the population stability of
    the rows it served, per own column (:meth:`drift`).
    """

    kind = "linear"
    complete = False
    pipeline = True
    objective = "logistic"
    width = 1
    #: its reasons are its own (:meth:`reasons`), whatever ``[serving] reasons`` says
    reason_sign = 0.0
    reason_model = None
    #: reasons given per answer at most (adverse-action notices name up to four)
    REASONS = 4

    def __init__(self, shard: dict, version: str):
        self.version, self.role = version, shard["role"]
        self.columns = list(shard["columns"])
        self.trained_with = shard["trained_with"]
        self.binner = Binner.from_dict(shard["binning"])
        self.coder = Coder.from_dict(shard["coding"])
        model = shard["model"]
        self.released_columns = list(model["columns"])
        self.scaler = Standardizer.from_dict(model, len(self.released_columns), "model shard")
        self.coef = np.asarray([model["coef"]], dtype=np.float64)
        self.intercept = np.asarray([model.get("intercept") or 0.0]) if self.role == "label" else np.zeros(1)
        self.points = [np.asarray(p, dtype=np.float64) for p in shard["points"]]
        #: the most points its columns can give a row (a feature party tells the label party this, no more)
        self.best_points = float(sum(p.max() for p in self.points)) if self.points else 0.0
        self.bin_counts = [np.asarray(c, dtype=np.int64) for c in shard["bin_counts"]]
        self.classes = list(model["classes"]) if self.role == "label" else None
        if self.role == "label":
            card = shard["scorecard"]
            self.scale = ScorecardScale(card["base_score"], card["base_odds"], card["pdo"])
            self.base_points = float(self.scale.offset - self.scale.factor * self.intercept[0])
            #: best points of each feature party's columns, from its ``loaded`` answer
            self.feature_best: dict[str, float] = {}
            self.served = [np.zeros(len(c), dtype=np.int64) for c in self.bin_counts]
            self._lock = threading.Lock()

    def codes(self, x: np.ndarray) -> np.ndarray:
        """Each row's bin per column (missing: the column's last bin)."""
        return flat_codes(self.binner.transform(x, f"party {self.role}", self.columns), self.binner.n_bins_,
                          self.binner.missing_code)

    def scores(self, x: np.ndarray) -> np.ndarray:
        coded = self.scaler.apply(self.coder.transform(self.codes(x)))
        return coded @ self.coef.T + self.intercept

    def own_points(self, codes: np.ndarray) -> np.ndarray:
        """Points of each row's bin in each of its selected columns: ``(n, selected)``."""
        return np.column_stack([p[codes[:, j]] for j, p in zip(self.coder.selected, self.points)]) \
            if self.points else np.zeros((len(codes), 0))

    def reasons(self, codes_row: np.ndarray, parts: dict) -> list[dict]:
        """The label party: what cost a row the most points, worst first (at most :data:`REASONS`).

        Its own columns by name (the points their bins gave, and how far below their best);
        a feature party as one total (``parts``: its partial log-odds, whose points are
        ``-factor u``; below the best its columns can give, which it told).
        """
        found = []
        for j, p in zip(self.coder.selected, self.points):
            got = float(p[codes_row[j]])
            found.append({"column": self.columns[j], "points": round(got, 2), "short": round(p.max() - got, 2)})
        for peer, u in parts.items():
            got = float(-self.scale.factor * u)
            found.append({"party": peer, "points": round(got, 2),
                          "short": round(self.feature_best.get(peer, got) - got, 2)})
        found.sort(key=lambda r: -r["short"])
        return [r for r in found if r["short"] > 0.005][:self.REASONS]

    def count(self, codes: np.ndarray) -> None:
        """Count the served rows' bins (the label party's own columns), for :meth:`drift`."""
        with self._lock:
            for j, served in enumerate(self.served):
                served += np.bincount(codes[:, j], minlength=len(served))[:len(served)]

    def drift(self) -> dict[str, float]:
        """Population stability of the rows served so far against training's, per own column (none served: {})."""
        with self._lock:
            served = [c.copy() for c in self.served]
        if not served or served[0].sum() == 0:
            return {}
        return {c: float(population_stability(t, s)) for c, t, s in zip(self.columns, self.bin_counts, served)}


class TreeShare:
    """One party's shard of gradient-boosted trees.

    A feature party's ``masks(x, trees)`` gives, per row, the leaves its own splits
    allow in each tree of ``trees``, side by side; the label party's ``raw(x, masks)``
    adds the leaf values every party's masks leave (its own splits' included).
    """

    kind = "trees"
    complete = False
    pipeline = False
    #: the label party's reasons' adverse side (0: none asked; :mod:`vfl.serving.reasons`)
    reason_sign = 0.0

    def __init__(self, shard: dict, version: str, features=()):

        self.version = version
        self.role = shard["role"]
        self.columns = list(shard["columns"])
        self.trained_with = shard["trained_with"]
        self.party = tree_shards.shard_party(shard, np.empty((0, len(self.columns))), shard["party"])
        if self.role == "feature":
            self.trees = [int(t["index"]) for t in shard["trees"]]
            return
        self.classes = [plain(c) for c in self.party.classes] if self.party.classes is not None else None
        self.feature_parties = list(shard["data_parties"][:-1])
        if list(features) and list(features) != self.feature_parties:
            raise DataError(f"version {version}: the trees were trained with the feature parties "
                            f"{self.feature_parties}, but the federation names {list(features)}")
        self.owners = tree_owners(self.party, self.feature_parties)
        self.widths = mask_widths(self.party, self.owners)

    def codes(self, x: np.ndarray) -> np.ndarray:
        return self.party.bin_new(x)

    def masks(self, x: np.ndarray, trees: list[int]) -> np.ndarray:
        return self.party.leaf_masks(trees, self.codes(x))

    def sides(self, x: np.ndarray) -> np.ndarray:
        """A feature party: per row, the side of each of its splits (True: left), what its masks are made of."""
        return self.party.split_bits(self.codes(x))

    def masks_of(self, sides: np.ndarray, trees: list[int]) -> np.ndarray:
        """A feature party: the masks of ``trees`` made of ``sides`` (as :meth:`sides`, perhaps randomized)."""
        return self.party.masks_from_bits(trees, sides)

    def raw(self, x: np.ndarray, masks: dict[str, np.ndarray]) -> np.ndarray:
        return raw_scores(self.party, self.codes(x), self.owners, masks)


class MLPShare:
    """One party's shard of a split network.

    A feature party's ``parts(x)`` is its part ``h_k W_k`` of the interactive layer
    per row, and which rows have one within the ring's fixed-point range; the label
    party's ``raw(x, parts)`` adds its own part and the intercept to the sum of the
    feature parties' and runs the top up to the output layer's pre-activation
    (``outputs`` applies the output activation, as batch prediction's outputs).
    """

    kind = "mlp"
    complete = True
    pipeline = False

    def __init__(self, shard: dict, version: str, features=()):
        self.version = version
        self.role = shard["role"]
        self.columns = list(shard["columns"])
        self.trained_with = shard["trained_with"]
        self.party = mlp_shards.shard_party(shard, shard["party"])
        #: values each row adds to a round: the interactive layer's width
        self.width = self.units = int(shard["units"])
        #: reasons (one feature party only: :mod:`vfl.serving.reasons`): the adverse side (0: none asked); the label
        #: party's: the feature party's ``(part at its training mean, [])`` from its ``loaded`` answer
        self.reason_sign = 0.0
        self.feature_reasons: dict[str, tuple] = {}
        if self.role == "feature":
            return
        self.task = shard["task"]
        self.classes = list(shard["classes"]) or None
        self.feature_parties = list(shard["data_parties"][:-1])
        if list(features) and list(features) != self.feature_parties:
            raise DataError(f"version {version}: the network was trained with the feature parties "
                            f"{self.feature_parties}, but the federation names {list(features)}")

    def parts(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(n, units)`` parts (0 where a row has none) and, per row, whether it has one: finite, below
        ``2^VALUE_BITS`` in magnitude (what :func:`vfl.crypto.ring.encode` takes)."""
        party = self.party
        if getattr(party, "scaler", None) is not None:
            x = party.scaler.apply(x)
        with np.errstate(all="ignore"):
            out = forward(party.bottom, x, [party.activation] * len(party.bottom))[-1] @ party.block
        ok = np.isfinite(out).all(axis=1) & (np.abs(out) < 2.0 ** ring.VALUE_BITS).all(axis=1)
        out[~ok] = 0.0
        return out, ok

    def raw(self, x: np.ndarray, parts: np.ndarray) -> np.ndarray:
        """The output layer's pre-activation per row (``parts``: the sum of the feature parties' parts)."""
        party = self.party
        upper = layer_activations(len(party.hidden_layer_sizes) + 1, party.activation, "identity")
        with np.errstate(all="ignore"):
            z = parts + party.bias
            if party.has_columns:
                x = x if getattr(party, "scaler", None) is None else party.scaler.apply(x)
                z = z + forward(party.bottom, x, [party.activation] * len(party.bottom))[-1] @ party.block
            return forward(party.top, activate(upper[0], z), upper[1:])[-1]


def load_share(models: Path, version: str, party: str, kind: str, family: str, features=()):
    """Party ``party``'s shard of ``version`` of a model of ``family`` (``kind``: ``"feature"`` or ``"label"``),
    checked, as its family's scorer reads it (:attr:`vfl.families.Family.scorer`'s ``load_share``)."""
    path = shard_path(models, version, party)
    problem = file_problem(path)
    if problem == "does not exist":
        raise MissingVersion(f"party {party} has no shard of model version {version}: {path} does not exist")
    if problem:
        raise DataError(f"party {party}'s shard of model version {version}, {path}, {problem}")
    return FAMILIES[family].module("scorer").load_share(path, version, party, kind, features)
