"""Model versions: each party's shard of one training, at ``MODELS/VERSION/model_NAME.json``.

Every party keeps its own folder of versions; a version is the same *name* at
every party (``models/3/model_bank.json`` at the label party,
``models/3/model_telco.json`` at telco).  The shards are the files ``vfl party``
writes, in their documented JSON formats (``vfl-model-shard/2`` for the linear
models, ``vfl-boosting-shard/1`` for trees, ``vfl-mlp-shard/1`` for split
networks, ``vfl-pipeline-shard/1`` for the credit pipeline), read with every check of batch prediction
(:func:`vfl.deploy.shards.linear.read_shard`,
:func:`~vfl.deploy.shards.trees.read_shard`, :func:`~vfl.deploy.shards.mlp.read_shard`).

Here: where the versions are, and :func:`load_share`, which reads a party's shard of one through its family's
scorer (:attr:`vfl.families.Family.scorer`).  What a service needs of a shard is its family's share class, beside
its round in :mod:`vfl.serving.scorers`: ``LinearShare`` turns rows into this party's partial scores
(``PipelineShare`` too, through its bins, their coding and its weights; its label party's also into the
scorecard's points, reason codes and the drift of served rows), ``TreeShare`` into leaf masks (a feature party)
or, with the feature parties' masks, into raw scores (the label party), ``MLPShare`` into this party's part of
the interactive layer (a feature party) or, with the sum of the feature parties' parts, into the network's
outputs before the output activation (the label party).  Each says what its peers must match: the training's
fingerprint (``trained_with``), and how many values per row the parties exchange.
"""

from __future__ import annotations

import re
from pathlib import Path

from vfl.errors import ConfigurationError, DataError, file_problem
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
