"""Model versions: each party's shard of one training, at ``MODELS/VERSION/model_NAME.json``.

Every party keeps its own folder of versions; a version is the same *name* at
every party (``models/3/model_bank.json`` at the label party,
``models/3/model_telco.json`` at telco).  The shards are the files ``vfl party``
writes, in their documented JSON formats (``vfl-model-shard/2`` for the linear
models, ``vfl-boosting-shard/1`` for trees), read with every check of batch
prediction (:func:`vfl.deploy.shards.linear.read_shard`,
:func:`~vfl.deploy.shards.trees.read_shard`).

What a service needs of a shard is here: :class:`LinearShare` turns rows into
this party's partial scores, :class:`TreeShare` into leaf masks (a feature party)
or, with the feature parties' masks, into raw scores (the label party).  Each
says what its peers must match: the training's fingerprint (``trained_with``),
and how many values per row the parties exchange.
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from vfl.errors import ConfigurationError, DataError
from vfl.deploy.shards import trees as tree_shards
from vfl.deploy.shards.linear import read_shard, shard_models, shard_scaler
from vfl.deploy.report import plain
from vfl.protocols.trees.inference import mask_widths, raw_scores, tree_owners
from vfl.deploy.serving_settings import VERSION, check_version


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
        self.classes = shard.get("classes") or None
        #: values each row adds to a round: one per model
        self.width = len(params)

    def scores(self, x: np.ndarray) -> np.ndarray:
        x = x if self.scaler is None else self.scaler.apply(x)
        with np.errstate(all="ignore"):
            return x @ self.coef.T + self.intercept


class TreeShare:
    """One party's shard of gradient-boosted trees.

    A feature party's ``masks(x, trees)`` gives, per row, the leaves its own splits
    allow in each tree of ``trees``, side by side; the label party's ``raw(x, masks)``
    adds the leaf values every party's masks leave (its own splits' included).
    """

    kind = "trees"

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

    def raw(self, x: np.ndarray, masks: dict[str, np.ndarray]) -> np.ndarray:
        return raw_scores(self.party, self.codes(x), self.owners, masks)


def load_share(models: Path, version: str, party: str, kind: str, boosting: bool, features=()):
    """Party ``party``'s shard of ``version`` (``kind``: ``"feature"`` or ``"label"``), checked."""
    path = shard_path(models, version, party)
    if not path.is_file():
        raise MissingVersion(f"party {party} has no shard of model version {version}: {path} does not exist")
    if boosting:
        return TreeShare(tree_shards.read_shard(path, party, kind), version, features)
    return LinearShare(read_shard(path, party, kind), version)
