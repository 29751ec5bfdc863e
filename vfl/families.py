"""The model families, one entry each: the one place that says what a family is and where its parts live.

A family is a folder on each floor (``vfl/parties/<name>``, ``vfl/protocols/<name>``), its run
(``vfl/runs/<name>.py``), its shard module (``vfl/deploy/shards/<name>.py``), the part ``vfl party`` runs
for it (``vfl/federation/``), and one :class:`Family` here.  Everything that depends on the family asks
its entry — whether a coordinator takes part, which settings it reads, which module trains it — instead
of testing which family it is::

    family = FAMILIES["trees"]
    family.coordinator          # False: the label party holds the key pair
    family.module("party")      # vfl.federation.trees: its train() and predict() for `vfl party`

The modules are named, not imported, so that this registry imports no face: each face imports the part it
runs (:meth:`Family.module`).  A fifth family is one folder per floor and one entry in :data:`FAMILIES`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from types import ModuleType

from vfl.errors import ConfigurationError


@dataclass(frozen=True)
class Family:
    """One model family: its word, its settings, what it allows, and its modules by layer.

    Parameters
    ----------
    name : str
        The family's one word in every layer, its folders and its run records (``run.json``'s ``family``).
    title : str
        The family in words, for messages: "gradient boosting".
    model : str or None
        ``[training] model`` in ``federation.toml`` that chooses it; None for a family chosen otherwise
        (the credit pipeline, by its ``[pipeline]`` table, around a logistic model).
    coordinator : bool
        Whether a coordinator takes part (trees: no, the label party holds the key pair).
    warm_start : bool
        Whether a run may continue the weights of the previous one (``[training] warm_start``).
    row_weights : bool
        Whether it weighs rows (``[data] sample_weight``).
    table3 : bool
        Whether it predicts by Yang et al.'s Table 3 as well as privately (``[prediction] mode``).
    dealer : bool
        Whether its coordinator deals masks and Beaver triples (networks) rather than decrypting.
    explains : bool
        Whether ``vfl predict`` explains its scores (``[prediction] explain``; every estimator explains).
    run, shard, party : str
        The modules of its per-role runs (the estimators' and ``vfl party``'s), of its model shards (``read_shard``
        and ``board_view``: what the board shows of a recorded model), and of what ``vfl party`` / ``vfl predict``
        run for it (``train``, ``predict``, ``say_trained``, ``say_predicted``).
    messages : str
        The module of its protocol's table of what each message carries (``MESSAGES``,
        :mod:`vfl.protocols.messages`), which the narration and the board read.
    settings : str
        Its settings dataclass, ``"module.Class"``: the one place its parameters are declared; its ``from_table``
        reads ``[training]`` (:meth:`read_training`).
    scorer : str
        The module of its serving round (``vfl serve``): ``load_share`` (a model version's share, checked) and
        ``score`` (the label party's round).
    unit : str
        What one step of its training is called ("epoch", "iteration"), as the board and the narration count them.
    export : str or None
        The module of its consented export (:mod:`vfl.export`: ``FORMATS`` and ``split``); None: it does not export.
    table : str or None
        A table of ``federation.toml`` beside ``[training]`` that chooses it and holds its own steps' settings (the
        credit pipeline's ``[pipeline]``): its reader refuses, in its own words, what the family does not take
        (warm start, row weights).  None: the generic refusals say so.
    """

    name: str
    title: str
    model: str | None
    coordinator: bool
    warm_start: bool
    row_weights: bool
    table3: bool
    dealer: bool
    run: str
    shard: str
    party: str
    messages: str
    settings: str
    scorer: str
    explains: bool = False
    unit: str = "epoch"
    table: str | None = None
    export: str | None = None

    def module(self, part: str) -> ModuleType:
        """The module of ``part`` (``"run"``, ``"shard"``, ``"party"``, ``"messages"``, ``"scorer"`` or ``"export"``), imported."""
        return importlib.import_module(getattr(self, part))

    def settings_class(self) -> type:
        """Its settings dataclass (:attr:`settings`), imported."""
        module, _, name = self.settings.rpartition(".")
        return getattr(importlib.import_module(module), name)

    def read_training(self, where: str, table: dict, roles: dict, also=()):
        """``[training]`` of ``federation.toml``, read and checked by its settings class.

        ``where`` starts every error; ``roles``: each party's role, by name; ``also``: the keys of the table the
        caller reads itself (taken out of ``table``, listed among the expected ones).
        """
        return self.settings_class().from_table(where, table, roles, also)


#: Every family, by its word.
FAMILIES: dict[str, Family] = {family.name: family for family in (
    Family("linear", "linear or logistic regression", None, coordinator=True, warm_start=True, row_weights=True,
           table3=True, dealer=False, explains=True, run="vfl.runs.linear", shard="vfl.deploy.shards.linear",
           party="vfl.federation.linear", messages="vfl.protocols.linear.messages",
           settings="vfl.protocols.linear.settings.TrainingSettings", scorer="vfl.serving.scorers.linear",
           export="vfl.export.linear"),
    Family("trees", "gradient boosting", "gradient_boosting", coordinator=False, warm_start=False,
           row_weights=False, table3=False, dealer=False, explains=True, unit="iteration", run="vfl.runs.trees",
           shard="vfl.deploy.shards.trees", party="vfl.federation.trees", messages="vfl.protocols.trees.messages",
           settings="vfl.protocols.trees.settings.TreeSettings", scorer="vfl.serving.scorers.trees",
           export="vfl.export.trees"),
    Family("mlp", "a split network", "mlp", coordinator=True, warm_start=False, row_weights=False, table3=False,
           dealer=True, run="vfl.runs.mlp", shard="vfl.deploy.shards.mlp", party="vfl.federation.mlp",
           messages="vfl.protocols.mlp.messages", settings="vfl.protocols.mlp.settings.MLPSettings",
           scorer="vfl.serving.scorers.mlp",
           export="vfl.export.mlp"),
    Family("credit", "the credit-scoring pipeline", None, coordinator=True, warm_start=False, row_weights=False,
           table3=True, dealer=False, explains=True, table="pipeline", run="vfl.runs.credit",
           shard="vfl.deploy.shards.credit", party="vfl.federation.credit", messages="vfl.protocols.credit.messages",
           settings="vfl.protocols.linear.settings.TrainingSettings", scorer="vfl.serving.scorers.credit",
           export="vfl.export.credit"),
)}

#: ``[training] model`` words that choose the linear family (its objective).
LINEAR_MODELS = ("linear", "logistic")


def family_of_table(model, pipeline: bool, where: str = "federation.toml") -> Family:
    """The family ``[training] model = model`` chooses; ``pipeline``: the file has a ``[pipeline]`` table.

    ``where`` (the file) starts the error for a model word no family has, or one the pipeline cannot take.
    """
    if model is None or model in LINEAR_MODELS:
        return FAMILIES["credit" if pipeline else "linear"]
    for family in FAMILIES.values():
        if family.model is not None and model == family.model:
            if pipeline:
                raise ConfigurationError(f"{where} [pipeline]: the pipeline's model is logistic regression on the "
                                         "coded bins: set [training] model = \"logistic\"")
            return family
    words = [*LINEAR_MODELS, *(f.model for f in FAMILIES.values() if f.model)]
    raise ConfigurationError(f"{where} [training]: model must be one of {words}, got {model!r}")
