"""The credit-scoring pipeline's run, per role: binning → WOE/IV → selection → the model's columns → points.

Written once and used alike by the estimators of :mod:`vfl.preprocessing` (every
role in a thread, :mod:`vfl.runs.threads`) and by ``vfl party`` / ``vfl predict``
with a ``[pipeline]`` table (:mod:`vfl.federation.credit`, one process per
party).  The protocol programs are :mod:`vfl.protocols.credit`'s; the logistic
model between the model's columns and the points is the linear family's, which
each face calls as it calls it for a plain linear model.

``data`` is one party's aligned rows: any object with ``.columns`` (list of
str), ``.features`` (rows by columns) and, at the label party, ``.labels``;
``role`` is the party's name and ``roster`` the data parties (the label party
holds the key; the coordinator takes part in the model only).

==========================  ======================================================
step                        functions
==========================  ======================================================
binning                     :func:`fit_binner` (:func:`event_classes`: the one check
                            of the label's classes), :func:`bin_codes`
WOE/IV                      :func:`woe_feature`, :func:`woe_label`
selection                   :func:`select_feature`, :func:`select_label`
both, as ``vfl party``      :func:`train_feature`, :func:`train_label`
the model's columns         :func:`coding`, :func:`model_coder`, :func:`model_rows`
the scorecard               :func:`points`, :func:`base_points`
the release check           :func:`part_release`, :func:`assessed`, :class:`ScorecardRelease`
==========================  ======================================================

A feature party's part of a score is one value per cell of its selected columns'
bins (a sum of per-column lookups), whatever its coding: its release check
(:mod:`vfl.protocols.release`) is run against its raw columns and their bin codes
(assessed columns ``"<column> (bin)"``), not against the coded model columns the
logistic model sees.
"""

from __future__ import annotations

import numpy as np

from vfl.errors import DataError, ProtocolError
from vfl.parties.binning import Binner
from vfl.parties.credit.feature_party import WOEFeatureParty
from vfl.parties.credit.label_party import WOELabelParty
from vfl.parties.credit.scorecard import Coder, ScorecardScale, flat_codes
from vfl.parties.credit.selection import SelectionRules
from vfl.parties.labels import event_classes as label_classes
from vfl.parties.scaling import Standardizer
from vfl.protocols import credit as protocol
from vfl.protocols.credit.settings import CreditSettings
from vfl.protocols.credit.woe import CHUNK_ROWS
from vfl.protocols.release import ReleasePolicy, check_model, evaluate, table_release
from vfl.protocols.roster import Roster
from vfl.runs.hooks import NO_HOOKS, Hooks
from vfl.transport import Endpoint


# --------------------------------------------------------------------------- binning

def event_classes(labels, role: str, strategy: str | None, scorecard: bool) -> np.ndarray:
    """The label's classes (sorted; ``classes[1]`` the event), refused unless two where one event class is needed.

    Monotone binning follows the event rate, and a scorecard scores the event's
    odds: both need two classes.  WOE, IV and selection take more one-vs-rest.

    Raises
    ------
    DataError
        Naming the party, the classes found and why two are needed.
    """
    classes = label_classes(labels, role)      # one row, or one class, is refused as such
    if len(classes) != 2 and (scorecard or strategy == "monotone"):
        found = f"the label column holds {len(classes)} classes ({', '.join(map(repr, classes[:5]))})"
        if scorecard:
            raise DataError(f"party {role}: a scorecard scores one event class, but {found}; WOE, IV and selection "
                            "take more classes one-vs-rest, without a scorecard")
        raise DataError(f"party {role}: monotone binning follows one event class, but {found}; use "
                        "label_strategy='quantile'")
    return classes


def fit_binner(settings: CreditSettings, data, role: str, label: bool, *, scorecard: bool) -> Binner:
    """This party's own binning of its own columns (its thresholds stay with it).

    The label party's columns by ``settings.label_strategy`` (``"monotone"``: with
    its labels), every other party's by ``settings.strategy``.  ``scorecard``:
    a scorecard follows (the label must then have two classes).
    """
    strategy = settings.label_strategy if label else settings.strategy
    events = None
    if label:
        classes = event_classes(data.labels, role, strategy, scorecard)
        if strategy == "monotone":
            events = data.labels == classes[1]
    return Binner(settings.max_bins, strategy, settings.min_bin_fraction).fit(data.features, f"party {role}",
                                                                              data.columns, events)


def bin_codes(binner: Binner, data, role: str) -> np.ndarray:
    """Each row's bin per column, a missing value in its column's last bin (refusing bad values by name)."""
    return flat_codes(binner.transform(data.features, f"party {role}", data.columns), binner.n_bins_,
                      binner.missing_code)


# --------------------------------------------------------------------------- WOE/IV and selection

def woe_feature(ep: Endpoint, data, role: str, binner: Binner, roster: Roster, hooks: Hooks = NO_HOOKS
                ) -> WOEFeatureParty:
    """A feature party's WOE/IV step: it multiplies the encrypted classes into its bins; returns its party.

    Of its ``hooks`` it reads the crypto ``engine``."""
    party = WOEFeatureParty(binner.transform(data.features, f"party {role}", data.columns), binner, role,
                           data.columns)
    protocol.run_feature(ep, party, roster.without_coordinator(), engine=hooks.engine)
    return party


def woe_label(ep: Endpoint, data, role: str, binner: Binner, roster: Roster, key_bits: int, insecure: bool,
              hooks: Hooks = NO_HOOKS, *, chunk_rows: int | None = None) -> WOELabelParty:
    """The label party's WOE/IV step (its key): every party's columns' tables; returns its party.

    Of its ``hooks`` it reads the crypto ``engine``."""
    party = WOELabelParty(binner.transform(data.features, f"party {role}", data.columns), binner, data.labels,
                          role, data.columns)
    protocol.run_label(ep, party, roster.without_coordinator(), key_bits, insecure, hooks.engine,
                       chunk_rows or CHUNK_ROWS)
    return party


def select_feature(ep: Endpoint, party: WOEFeatureParty, data, roster: Roster, rules: SelectionRules,
                   share_woe: bool) -> dict:
    """A feature party learns its own plan (with ``share_woe``, its bins' WOE and its IVs).

    Returns its step: ``selected`` (bool per column), ``woe`` and ``iv`` (None without ``share_woe``).
    """
    protocol.select_feature(ep, party, roster.without_coordinator(), rules, data.features, share_woe)
    return party.state()


def select_label(ep: Endpoint, party: WOELabelParty, data, roster: Roster, rules: SelectionRules,
                 share_woe: bool) -> dict:
    """The label party selects every party's columns by ``rules`` and tells each its own plan.

    Returns its step: ``selected`` (its own columns), ``woe`` (its columns' bins'
    WOE against ``classes[1]``), ``iv`` and ``plan`` (every party's), ``classes``.
    """
    roster = roster.without_coordinator()
    plan = protocol.select_label(ep, party, roster, rules, data.features, share_woe)
    return {"selected": plan[party.role].tolist(), "woe": [t["woe"][:, 0].tolist() for t in party.tables[party.role]],
            "iv": {k: party.ivs(k).tolist() for k in roster.data_parties},
            "plan": {k: plan[k].tolist() for k in roster.data_parties},
            "classes": [c.item() if hasattr(c, "item") else c for c in party.classes]}


def train_feature(ep: Endpoint, data, role: str, binner: Binner, roster: Roster, settings: CreditSettings,
                  hooks: Hooks = NO_HOOKS) -> tuple[WOEFeatureParty, dict]:
    """A feature party's WOE/IV and selection: its party and its step (:func:`select_feature`); of its
    ``hooks`` it reads the crypto ``engine``."""
    party = woe_feature(ep, data, role, binner, roster, hooks)
    return party, select_feature(ep, party, data, roster, settings.rules, settings.share_woe)


def train_label(ep: Endpoint, data, role: str, binner: Binner, roster: Roster, settings: CreditSettings,
                key_bits: int, insecure: bool, hooks: Hooks = NO_HOOKS) -> tuple[WOELabelParty, dict]:
    """The label party's WOE/IV and selection: its party and its step (:func:`select_label`); of its ``hooks``
    it reads the crypto ``engine``."""
    party = woe_label(ep, data, role, binner, roster, key_bits, insecure, hooks)
    return party, select_label(ep, party, data, roster, settings.rules, settings.share_woe)


# --------------------------------------------------------------------------- the model's columns and the points

def coding(role: str, roster: Roster, share_woe: bool) -> str:
    """How a party's columns enter the model: WOE values (the label party; a feature party given them), else bins."""
    return "woe" if role == roster.label or share_woe else "bins"


def model_coder(role: str, how: str, binner: Binner, codes: np.ndarray, selected, columns, woe=None) -> Coder:
    """This party's model columns from its selected columns' bins.

    Parameters
    ----------
    how : {"woe", "bins"}
        :func:`coding`'s answer.
    codes : int array (rows, columns)
        Its training rows' bins (:func:`bin_codes`); a ``"bins"`` coding leaves out
        each column's most populous bin (the reference) and its empty ones.
    selected : sequence of int
        The indices of its selected columns.
    columns : list of str
        All its columns.
    woe : list of arrays, optional
        Per column (all of them), its bins' WOE values (``"woe"``).
    """
    selected = list(selected)
    sizes = (binner.n_bins_ + 1).tolist()
    if how == "woe":
        if woe is None:
            raise ProtocolError(f"{role}: the plan came without the WOE values share_woe promises")
        return Coder("woe", sizes, selected, columns, woe=[woe[j] for j in selected])
    counts = [np.bincount(codes[:, j], minlength=sizes[j]) for j in selected]
    return Coder("bins", sizes, selected, columns, counts=counts)


def model_rows(binner: Binner, coder: Coder, data, role: str) -> np.ndarray:
    """The model's columns of a party's rows (before the model's own scaling)."""
    return coder.transform(bin_codes(binner, data, role))


def points(coder: Coder, coef, mean, scale, card: ScorecardScale) -> list[np.ndarray]:
    """Every selected column's points per bin, from the model's weights on the standardized columns.

    ``mean`` and ``scale`` are the model's standardization of this party's
    columns (None: not standardized); the constant the unscaling moves into
    the intercept is shared among the party's columns.
    """
    coef = np.asarray(coef, dtype=np.float64)
    if mean is None:
        return coder.points(coef, 0.0, card)
    unscaled, constant = Standardizer(np.asarray(mean), np.asarray(scale)).unscale(coef)
    return coder.points(unscaled, float(constant), card)


def base_points(card: ScorecardScale, intercept: float) -> float:
    """The label party's base points: the score of the intercept alone."""
    return float(card.offset - card.factor * float(intercept))


# --------------------------------------------------------------------------- the release check

#: What a feature party's part of a score is, for its release check's messages.
PART = "its part of each score (one value per bin of its selected columns)"


def part_release(binner: Binner, coder: Coder, spec: dict) -> dict:
    """A feature party's part of a score as a function of its raw columns: the table release
    (:func:`vfl.protocols.release.table_release`) equal to ``spec`` (its model columns' linear release, one
    output) composed with its bins and coding.

    Each selected column adds one value per bin (its missing bin's for a missing value); the coding is additive
    over columns, so each column's values are read off ``spec`` with the other columns held at their first bin.
    A bin holds ``t_(j-1) < x <= t_j``; the table looks values up with ``searchsorted(edges, x, 'right')``, so
    its edges are the thresholds moved up by one ulp (the same bins for every float).
    """
    sizes = coder.sizes
    base_codes = np.zeros((1, len(sizes)), dtype=np.int64)
    base = float(evaluate(spec, coder.transform(base_codes)).ravel()[0])
    tables = []
    for j in coder.selected:
        grid = np.repeat(base_codes, sizes[j], axis=0)
        grid[:, j] = np.arange(sizes[j])
        values = evaluate(spec, coder.transform(grid))[:, 0] - base
        if not tables:
            values = values + base          # the constant rides on the first column's values
        edges = np.nextafter(np.asarray(binner.thresholds_[j], dtype=np.float64), np.inf)
        tables.append((j, edges, values[:sizes[j] - 1], values[sizes[j] - 1]))
    return table_release(tables)


def assessed(binner: Binner, coder: Coder, raw, role: str) -> tuple[list, np.ndarray]:
    """The columns a feature party's part of a score is assessed against, and their values for the rows ``raw``:
    its raw columns, then each one's bin code (``"<column> (bin)"``, missing values their own bin)."""
    raw = np.asarray(raw, dtype=np.float64)
    codes = flat_codes(binner.transform(raw, f"party {role}", coder.columns), binner.n_bins_, binner.missing_code)
    return [*coder.columns, *(f"{c} (bin)" for c in coder.columns)], np.hstack([raw, codes.astype(np.float64)])


class ScorecardRelease(ReleasePolicy):
    """A feature party's release policy as its scorecard part sees it: every check the logistic model asks for on
    the coded model columns (its partial scores, their linear release) is run instead on the party's raw columns
    and their bins (:func:`assessed`), with the same function as a table of values per bin (:func:`part_release`).

    ``raw`` are the party's raw rows of the call (training, or the rows predicted), in the order of the model's.
    """

    def __init__(self, policy: ReleasePolicy, binner: Binner, coder: Coder, raw, how: str | None = None):
        super().__init__(policy.party, policy.ledger, policy.allowed, how or policy.how, policy.epsilon,
                         policy.delta, policy.clip, policy.budget, policy.key)
        self.binner, self.coder, self.raw = binner, coder, np.asarray(raw, dtype=np.float64)

    def _viewed(self, columns, features, spec: dict) -> tuple[list, np.ndarray, dict]:
        if list(columns) != list(self.coder.names) or len(features) != len(self.raw):
            raise DataError(f"party {self.party}: the scorecard's release check was handed {len(features)} rows "
                            f"of {list(columns)} for {len(self.raw)} rows of {self.coder.names}")
        names, values = assessed(self.binner, self.coder, self.raw, self.party)
        if spec["kind"] == "reasons":           # its reason codes: each column's contribution as a table
            return names, values, dict(spec, parts=[part_release(self.binner, self.coder, p) for p in spec["parts"]])
        return names, values, part_release(self.binner, self.coder, spec)

    def named(self, what: str) -> str:
        return _part(what)

    def release(self, label_party: str, columns, features, spec: dict, what: str, **options) -> np.ndarray:
        names, values, table = self._viewed(columns, features, spec)
        return super().release(label_party, names, values, table, _part(what), **options)

    def check_model(self, label_party: str, columns, features, spec: dict, what: str):
        names, values, table = self._viewed(columns, features, spec)
        return check_model(self.ledger, label_party, names, values, table, what=_part(what))


def model_groups(coder: Coder) -> list[str]:
    """The column each model column of ``coder`` comes from (a column's bin indicators are one column's): how an
    explanation reports a scorecard's contributions."""
    if coder.coding == "woe":
        return [coder.columns[j] for j in coder.selected]
    return [coder.columns[j] for j, levels in zip(coder.selected, coder.levels) for _ in levels]


def _part(what: str) -> str:
    return what.replace("its partial scores", PART) if "its partial scores" in what else f"{PART}: {what}"


def check_part(policy: ReleasePolicy, label_party: str, binner: Binner, coder: Coder, raw, spec: dict, *,
               what: str, ids=None, values=None, version: str | None = None) -> np.ndarray:
    """A feature party's release check of its part of a score for the rows ``raw`` (``spec``: its model columns'
    linear release; ``values``: the exact parts), outside the logistic model's run (``vfl predict``, serving):
    returns what it may send (DP noise added if chosen)."""
    names, assessed_values = assessed(binner, coder, raw, policy.party)
    return policy.release(label_party, names, assessed_values, part_release(binner, coder, spec), what, ids=ids,
                          values=values, version=version)


def check_trained_part(policy: ReleasePolicy, label_party: str, binner: Binner, coder: Coder, raw, spec: dict,
                       *, what: str):
    """After training (``vfl party``): the check of its part of a score on its training rows, kept in its ledger."""
    names, assessed_values = assessed(binner, coder, raw, policy.party)
    return check_model(policy.ledger, label_party, names, assessed_values, part_release(binner, coder, spec),
                       what=what)
