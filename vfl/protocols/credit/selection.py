"""Selection between parties: the label party decides from IVs (and correlations), each party learns its own plan.

::

    Step  Feature party k                                  Label party
    1     -                                                the columns every party keeps by IV (it holds all IVs)
    with a correlation or VIF bound (max_correlation, max_vif):
    2     <- which of its columns the IV rules keep
    3     Pearson of the label party's kept columns with its own, under the label party's key
          (:mod:`vfl.protocols.credit.pearson`): both learn that block
    4     its kept columns' correlations among themselves -> label
    5                                                      drops columns by correlation or VIF
    always:
    6     <- which of its columns are selected (with share_woe: its bins' WOE values and its columns' IVs)

Feature parties never exchange messages, so the correlations between two
feature parties' columns are not known: the correlation bound compares each
column with the label party's and its own party's, and the VIF of a column is
its largest over the groups "label party's columns and one feature party's".
"""

from __future__ import annotations

import numpy as np

from vfl.errors import ProtocolError
from vfl.parties.credit.feature_party import WOEFeatureParty
from vfl.parties.credit.label_party import WOELabelParty
from vfl.parties.credit.selection import SelectionRules, check_selected, select_by_correlation, select_by_iv
from vfl.parties.credit.statistics import standardized
from vfl.protocols.credit.pearson import pearson_holder, pearson_peer
from vfl.protocols.credit.woe import receive_plan, send_plan
from vfl.protocols.fields import bits, unbits
from vfl.protocols.roster import Roster
from vfl.transport import Endpoint


def select_label(ep: Endpoint, party: WOELabelParty, roster: Roster, rules: SelectionRules, x: np.ndarray,
                 share_woe: bool = False) -> dict:
    """The label party's side (``x``: its own raw columns); returns ``{party: bool per column}``, every party's plan.

    Also sets ``party.correlation`` (the kept columns as ``(party, column)`` pairs, and
    their correlation matrix, NaN between two feature parties) when a bound asks for it.
    """
    ivs = {k: party.ivs(k) for k in (*roster.features, roster.label)}
    kept = select_by_iv(ivs, rules)
    check_selected(kept, ivs, rules)
    party.correlation = None
    if rules.needs_correlation:
        for k in roster.features:
            ep.send(k, "iv_kept", "public", **bits(kept[k]))
        mine = np.flatnonzero(kept[roster.label])
        columns = [(k, int(j)) for k in (*roster.features, roster.label) for j in np.flatnonzero(kept[k])]
        index = {pc: i for i, pc in enumerate(columns)}
        matrix = np.full((len(columns), len(columns)), np.nan)
        inside = np.corrcoef(_filled(x[:, mine]), rowvar=False) if len(mine) > 1 else np.ones((len(mine),) * 2)
        own = [index[(roster.label, int(j))] for j in mine]
        matrix[np.ix_(own, own)] = inside
        groups = []
        for k in roster.features:
            theirs = [index[(k, int(j))] for j in np.flatnonzero(kept[k])]
            block = pearson_holder(ep, k, party.context, x[:, mine])
            within = ep.recv(k, "own_correlation")["matrix"]
            if not isinstance(within, np.ndarray) or within.shape != (len(theirs),) * 2 or \
                    not np.all(np.isfinite(within)):
                raise ProtocolError(f"{party.role}: a malformed 'own_correlation' from {k}")
            matrix[np.ix_(own, theirs)] = block
            matrix[np.ix_(theirs, own)] = block.T
            matrix[np.ix_(theirs, theirs)] = within
            groups.append(own + theirs)
        keep = select_by_correlation(columns, ivs, matrix, rules, groups or [own])
        for (k, j), stays in zip(columns, keep):
            kept[k][j] = stays
        party.correlation = (columns, matrix)
    send_plan(ep, party, roster, kept, share_woe)
    return kept


def select_feature(ep: Endpoint, party: WOEFeatureParty, roster: Roster, rules: SelectionRules, x: np.ndarray,
                   share_woe: bool = False) -> WOEFeatureParty:
    """A feature party's side (``x``: its own raw columns): it learns its plan (and what a bound makes it compute)."""
    if rules.needs_correlation:
        kept = np.flatnonzero(unbits(ep.recv(roster.label, "iv_kept"), party.n_columns))
        party.correlation = pearson_peer(ep, roster.label, x[:, kept], party.role, party.context.engine)
        within = np.corrcoef(_filled(x[:, kept]), rowvar=False) if len(kept) > 1 else np.ones((len(kept),) * 2)
        ep.send(roster.label, "own_correlation", "plaintext", matrix=np.asarray(within, dtype=np.float64))
    return receive_plan(ep, party, roster, share_woe)


def _filled(x: np.ndarray) -> np.ndarray:
    """Missing values at their column's mean, as the encrypted Pearson counts them (a constant column: zeros)."""
    return standardized(x)
