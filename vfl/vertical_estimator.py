"""What every vfl estimator does around its family's run, written once.

An estimator (linear models, trees, split networks, the scorecard's model) runs every role's run of its
family (:mod:`vfl.runs`) in threads over the in-process transport.  Around that run they all

* name the roles from the data: the party holding the label column is the label party, the others feature
  parties (:meth:`VerticalEstimator._roster_of`);
* hand each data party its own rows (:meth:`VerticalEstimator._roles`);
* give each feature party its release policy: its release ledger for this data set, its opt-in and its
  differential-privacy options (:mod:`vfl.release_options`), kept per fitted model so that a prediction
  replays what its training released (:meth:`VerticalEstimator._releases`);
* record the fitted roster, the parties' column names and, for prediction, each party's state
  (:meth:`VerticalEstimator._fitted`), and refuse to predict before a fit (:meth:`VerticalEstimator._check_fitted`);
* export the model once the parties consent (:class:`ModelExport`'s ``consent`` and ``export``, through
  :mod:`vfl.export.assemble`, the checks ``vfl export`` makes too): a family gives its parties' shards by
  ``_shards()``, their fingerprint by :meth:`VerticalEstimator._trained_with`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import secrets

from sklearn.base import BaseEstimator

from vfl import fitted_runs, release_options
from vfl.dataset import VerticalDataset
from vfl.errors import DataError, NotFittedError
from vfl.export import assemble, exporter
from vfl.protocols import Roster
from vfl.runs import explained
from vfl.runs.data import RoleData


class ModelExport:
    """``consent`` and ``export`` of a fitted model whose family exports (docs/export.md), written once.

    A class using it names its ``_family`` and gives ``_shards()``: every data party's shard by name, as the
    family's ``read_shard`` returns it.  The parties' roles and the label party (the default recipient) are read
    from the shards; the checks are :mod:`vfl.export.assemble`'s, the ones ``vfl export`` makes.
    """

    _family = ""

    def consent(self, party: str, *, key, certificate, format: str, to: str | None = None) -> dict:
        """Party ``party``'s signed consent to export this model as ``format`` to ``to`` (default: the label party).

        For teaching and tests, where one process holds every party: in a federation each party signs its own
        with ``vfl export consent``.  A consent to a whole-model format carries the party's shard (its part of the
        model); one to ``"split"`` does not.

        Parameters
        ----------
        party : str
            A data party of the fit, not the recipient.
        key, certificate : path or object
            The party's federation key and certificate (PEM files, as ``vfl certs`` writes, or ``cryptography``
            objects).
        format : str
            One of :func:`vfl.export.formats` of the family.
        to : str, optional

        Returns
        -------
        dict
            The consent (:mod:`vfl.export.consent`), for :meth:`export`'s ``consents``.
        """
        shards = self._export_shards()
        roles = assemble.roles_of(shards)
        return assemble.make_consent(assemble.own_shard(shards, party), family=self._family, export_format=format,
                                     recipient=to or assemble.label_of(roles), roles=roles, key=key,
                                     certificate=certificate)

    def export(self, path, format: str, consents=(), ca=None, to: str | None = None):
        """Write this model as ``format`` to ``path``, once every other party consented (:meth:`consent`).

        Parameters
        ----------
        path : path
            The file (the split export: a new folder, with one part per party and the label party's
            ``combiner.json``).
        format : str
            One of :func:`vfl.export.formats` of the family (trees: ``"xgboost-json"``, ``"onnx"``, ``"split"``).
        consents : list of dict
            Every data party's consent but the recipient's, to exactly this export.
        ca : path or TLSFiles
            The CA certificate trusted for every party's certificate, or a party's ``TLSFiles`` (its pins).
        to : str, optional
            The recipient (default: the label party; the split export: the label party).

        Returns
        -------
        Path
            ``path``.  Nothing is written when a check fails (:mod:`vfl.export.assemble`).
        """
        shards = self._export_shards()
        roles = assemble.roles_of(shards)
        return assemble.export(path, family=self._family, fmt=format, recipient=to or assemble.label_of(roles),
                               roles=roles, shards=shards, consents=list(consents), trust=assemble.trust_of(ca))

    def _export_shards(self) -> dict:
        """Each data party's shard (refused for a family with no export, and before a fit)."""
        exporter(self._family)
        fitted = getattr(self, "_check_fitted", None)
        if fitted is not None:
            fitted()
        return self._shards()

    def _shards(self) -> dict:
        """Each data party's shard, by name, as ``vfl.deploy.shards.<family>.read_shard`` returns it: the family's
        hook for :meth:`export`."""
        raise NotImplementedError(f"{type(self).__name__} gives no shards to export: its family's export needs "
                                  "its _shards()")


class VerticalEstimator(ModelExport, BaseEstimator):
    """The fit and prediction scaffold every vfl estimator shares (scikit-learn's ``BaseEstimator`` beneath it)."""

    #: The attribute a fit sets, by which :meth:`_check_fitted` knows the model is fitted.
    _fitted_attribute = "n_iter_"
    #: The family's word (:data:`vfl.families.FAMILIES`) in its run records, and the role that learns the loss.
    _family, _loss_known_by = "", "label"

    def save_run(self, path, data: VerticalDataset | None = None, party: str | None = None):
        """Write this fit's run record as party ``party`` saw it (default: the label party) under ``path``, for
        ``vfl board --run path``; with labelled ``data``, the label party's metrics and curves on it. See
        :func:`vfl.fitted_runs.save_run`. Returns the run's folder.
        """
        self._check_fitted()
        return fitted_runs.save_run(self, path, data, party, self._family, loss_known_by=self._loss_known_by,
                                    files=self._run_files())

    def _trained_with(self) -> str:
        """This fit's fingerprint, as a federation's shards carry one: its parameters' SHA-256, ``/``, its run id."""
        params = json.dumps(self.get_params(deep=False), sort_keys=True, default=repr)
        return f"{hashlib.sha256(params.encode()).hexdigest()}/{self.__dict__.get('_run_id', 'unknown')}"

    def _run_files(self) -> dict | None:
        """``{name: writer(target, party)}`` of the files a run record keeps beside it (a family's shard)."""
        return None

    def _settings_of(self, settings, **given):
        """The family's ``settings`` dataclass (the one place its parameters are declared, which ``federation.toml``
        reads too) from this estimator's parameters of the same names; ``given``: its fields the estimator does not
        take as parameters of the same form."""
        params = self.get_params(deep=False)
        names = [f.name for f in dataclasses.fields(settings) if f.init and f.name not in given and f.name in params]
        return settings(**{name: params[name] for name in names}, **given)

    def _roster_of(self, data: VerticalDataset, coordinator: str | None = None) -> Roster:
        """The roles of ``data``'s parties: the label column's holder is the label party."""
        return Roster(data.feature_parties, data.label_party, coordinator)

    @staticmethod
    def _roles(data: VerticalDataset, roster: Roster, features=None) -> dict[str, RoleData]:
        """Every data party's own rows: training (``features`` None, the label party with the labels), or the
        ``features`` a prediction scores, by party."""
        if features is None:
            return {name: RoleData(data.columns(name), data.features(name),
                                   data.labels if name == roster.label else None, ids=data.ids)
                    for name in roster.data_parties}
        return {name: RoleData(data.columns(name), values, ids=data.ids) for name, values in features.items()}

    def _releases(self, roster: Roster, roles: dict[str, RoleData] | None = None) -> dict:
        """Each feature party's release policy (:mod:`vfl.protocols.release`).

        Training (``roles`` given): a fresh ledger scope per feature party for this data set, kept on the
        estimator.  Prediction: the scope its training started in this process (a model copied or unpickled
        elsewhere starts one of its own there).
        """
        release_options.check(self)
        allowed = release_options.allowed(self, roster)
        if roles is not None:
            self._release_scopes = {k: release_options.scope(roster.label, roles[k].columns, roles[k].features)
                                    for k in roster.features}
        scopes = self.__dict__.get("_release_scopes") or {}
        return {k: release_options.policy(self, k, scopes.get(k) or "unscoped-" + secrets.token_hex(8), allowed)
                for k in roster.features}

    def _fitted(self, roster: Roster, data: VerticalDataset, parties: dict | None = None) -> None:
        """Record what a fit learned of the federation: the roster, the parties' roles and column names, and each
        data party's state (``parties``, by name) for prediction."""
        if parties is not None:
            self._parties = parties
        self._run_id = secrets.token_hex(16)
        self._roster = roster
        self.label_party_, self.feature_parties_ = roster.label, roster.features
        self.feature_names_ = {name: data.columns(name) for name in roster.data_parties}

    def _check_fitted(self) -> None:
        if not hasattr(self, self._fitted_attribute):
            raise NotFittedError(f"this {type(self).__name__} is not fitted yet; call fit first")

    def _prediction_data(self, data: VerticalDataset, complete: bool = False) -> dict:
        """The columns a prediction scores, by party (the fitted columns, checked; ``complete``: no missing value);
        refuses before a fit."""
        self._check_fitted()
        if not isinstance(data, VerticalDataset):
            raise DataError(f"prediction takes a VerticalDataset, got {type(data).__name__}")
        if complete:
            data.require_complete()
        return data.prediction_features(self.feature_names_)


class PartyExplanations:
    """``explain`` and ``predict_reasons`` of a family explained at party level (trees, split networks): the
    parties' exact Shapley values, which the label party computes in a private prediction
    (:meth:`_party_shapley`: ``{"players", "shapley", "base"}``, the label party first).  How a family marginalises
    an absent party, and what each party then sends, is in docs/explanations.md."""

    def explain(self, data: VerticalDataset):
        """Each row's raw score (a margin, log-odds or a regressor's output) split among the parties: their exact
        Shapley values (the parties as players), one column per party (the label party's first) and
        ``base_value``; a row sums to the raw score."""
        return explained.frame(self._explained(data), index=data.ids)

    def predict_reasons(self, data: VerticalDataset, k: int = 4, adverse=None):
        """Per row the ``k`` parties whose Shapley values push most toward the adverse outcome (``adverse``: a
        class, default ``classes_[1]``; a regressor's ``"high"`` or ``"low"``), as ``"information from <party>"``
        (a party-level explanation names parties, not columns).  A DataFrame of ``reason_1`` .. ``reason_k``."""
        sign = explained.adverse_sign(getattr(self, "classes_", None), adverse)
        return explained.reasons(self._explained(data), k, sign, index=data.ids)

    def _explained(self, data: VerticalDataset) -> dict:
        return explained.party_level(self._party_shapley(data))

    def _party_shapley(self, data: VerticalDataset) -> dict:
        raise NotImplementedError
