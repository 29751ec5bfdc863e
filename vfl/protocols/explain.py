"""The messages of an explanation, the same for every family: what a feature party sends the label party.

::

    Step  Feature party k                                  Label party
    1     <- "explain": the rows to explain, the adverse side (+1: a higher score is adverse, -1: lower;
             0: contributions only, no reasons asked)
    2     "contributions" ->                               its own columns' contributions (computed at home),
          per row its *total* (one number),                 each feature party's total, the base value
          its model constant (one number, not per row),
          and, where it consents (reason_columns), per row
          the index of the column it names as its reason

Every per-row number a feature party sends here has passed its release check
(:mod:`vfl.protocols.release`) first: its totals are its partial scores less a
constant (the very release prediction makes, the same ledger entry), its codes
a release of their own (:func:`vfl.protocols.release.reason_release`).  The trees
and networks explain inside their own private prediction and send nothing here.
"""

from __future__ import annotations

import json

import numpy as np

from vfl.errors import DataError, ProtocolError
from vfl.protocols.fields import count
from vfl.protocols.roster import Roster
from vfl.transport import Endpoint

#: What each message carries, by sender role (the narration and the board read it: :mod:`vfl.deploy.narration`).
MESSAGES = {
    ("label", "explain"): "how many rows to explain and which side is adverse (no row, value or score)",
    ("feature", "contributions"): "per row its total (its partial score less its score at the training mean: the "
                                  "release prediction makes, checked), its one constant, and where it consents the "
                                  "index of the column it names as the row's reason (a release checked as one)",
}


def ask(ep: Endpoint, roster: Roster, n_rows: int, sign: float) -> None:
    """The label party asks every feature party for its part of the explanation of ``n_rows`` rows."""
    for k in roster.features:
        ep.send(k, "explain", "public", n_rows=int(n_rows), sign=float(sign))


def asked(ep: Endpoint, roster: Roster, n_rows: int) -> float:
    """A feature party reads the request; returns the adverse side (+1 or -1; 0: no reasons asked)."""
    message = ep.recv(roster.label, "explain")
    asked_rows = count(message, "n_rows")
    if asked_rows != n_rows:
        raise DataError(f"party {ep.role} has {n_rows} rows to explain but party {roster.label} has {asked_rows}; "
                        "the parties' rows must be aligned")
    sign = message["sign"]
    if sign not in (1.0, -1.0, 0.0):
        raise ProtocolError(f"{ep.role}: the adverse side must be +1, -1 or 0 (no reasons asked), got {sign!r}")
    return float(sign)


def send_contributions(ep: Endpoint, roster: Roster, totals, constant: float, codes=None, names=None) -> None:
    """A feature party's part: per row its total, its constant, and (consenting) per row the index of the code it
    names among ``names`` (-1: none)."""
    fields = dict(totals=np.asarray(totals, dtype=np.float64).ravel(), constant=float(constant))
    if codes is not None:
        fields.update(codes=np.asarray(codes, dtype=np.int64).ravel(), names=json.dumps(list(names)))
    ep.send(roster.label, "contributions", "plaintext", **fields)


def receive_contributions(ep: Endpoint, roster: Roster, n_rows: int) -> dict:
    """Every feature party's part, by name: ``{"totals", "constant", "codes" (or None), "names"}``, checked."""
    out = {}
    for k in roster.features:
        message = ep.recv(k, "contributions")
        totals = np.asarray(message["totals"], dtype=np.float64)
        if totals.shape != (n_rows,) or not np.isfinite(totals).all():
            raise ProtocolError(f"{ep.role}: party {k} sent {totals.shape} totals for {n_rows} rows (or a "
                                "non-finite one)")
        codes, names = message.fields.get("codes"), []
        if codes is not None:
            names = json.loads(message["names"])
            codes = np.asarray(codes, dtype=np.int64)
            if (codes.shape != (n_rows,) or not isinstance(names, list)
                    or ((codes < -1) | (codes >= len(names))).any()):
                raise ProtocolError(f"{ep.role}: party {k} sent reason codes that do not fit its {len(names)} "
                                    "published codes")
        out[k] = {"totals": totals, "constant": float(message["constant"]), "codes": codes,
                  "names": [str(n) for n in names]}
    return out
