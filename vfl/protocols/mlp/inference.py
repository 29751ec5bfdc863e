"""Prediction with a split network: only the label party learns the outputs — one program per role.

::

    Step  Feature party k                     Label party B                      Coordinator C
    1     its row count -> B                  checks the counts; rows -> C
                                              (two feature parties or more)
    2                                                                            masks summing to 0 -> each k
    3     h_k W_k (+ mask) -> B               the sum, its own part, the top: the outputs

A feature party learns nothing (it receives only a mask); C learns the row
count; the label party learns the sum of the feature parties' parts of every
row and the outputs (with one feature party, that party's part: as in training).
"""

from __future__ import annotations

import numpy as np

from vfl.errors import DataError
from vfl.parties.mlp.feature_party import MLPFeatureParty
from vfl.parties.mlp.label_party import MLPLabelParty
from vfl.protocols.mlp.settings import MLPSettings
from vfl.protocols.mlp.training import receive_parts, send_part, deal_masks
from vfl.protocols.roster import Roster
from vfl.transport import Endpoint


def predict_feature(ep: Endpoint, party: MLPFeatureParty, x, settings: MLPSettings, roster: Roster,
                    part=None) -> int:
    """Feature party ``k``'s part of prediction on its rows ``x``; returns how many rows it scored.

    ``part``: what it releases in place of its exact part (checked, with DP noise if chosen).
    """
    x = party.check_columns(x)
    ep.send(roster.label, "predict", "public", rows=len(x))
    send_part(ep, party.part(x) if part is None else part, roster.label, roster.coordinator, settings,
              len(roster.features) > 1, "part")
    return len(x)


def predict_label(ep: Endpoint, party: MLPLabelParty, x, settings: MLPSettings, roster: Roster) -> np.ndarray:
    """The label party's part: the network's outputs on its rows ``x`` (after the output activation)."""
    x = party.check_columns(np.asarray(x, dtype=np.float64).reshape(len(x), -1))
    for k in roster.features:
        rows = int(ep.recv(k, "predict")["rows"])
        if rows != len(x):
            raise DataError(f"party {k} scores {rows} rows, the label party {party.role} {len(x)}: the prediction "
                            "tables must be aligned")
    if len(roster.features) > 1:
        ep.send(roster.coordinator, "predict", "public", rows=len(x))
    return party.output(x, receive_parts(ep, roster, "part", len(x), settings))


def predict_coordinator(ep: Endpoint, settings: MLPSettings, roster: Roster) -> int:
    """The coordinator's part (two feature parties or more): the masks; returns the row count."""
    if len(roster.features) < 2:
        return 0
    rows = int(ep.recv(roster.label, "predict")["rows"])
    deal_masks(ep, roster, "part", rows, settings.units)
    return rows


def send_explained_part(ep: Endpoint, part, constant, roster: Roster) -> None:
    """For an explanation: a feature party's part ``h_k W_k`` of every row, unmasked (the label party needs each
    party's apart, to leave it out of a coalition; the same release as prediction's, checked by the run), and its
    part at its training mean (one vector, not per row)."""
    ep.send(roster.label, "explained_part", "plaintext", part=np.asarray(part, dtype=np.float64),
            constant=np.asarray(constant, dtype=np.float64).ravel())


def receive_explained_parts(ep: Endpoint, roster: Roster, n_rows: int, units: int) -> dict:
    """Every feature party's part and constant, by name, checked."""
    out = {}
    for k in roster.features:
        message = ep.recv(k, "explained_part")
        part, constant = np.asarray(message["part"]), np.asarray(message["constant"])
        if part.shape != (n_rows, units) or constant.shape != (units,) or not (
                np.isfinite(part).all() and np.isfinite(constant).all()):
            raise DataError(f"party {ep.role}: party {k} sent a part of shape {part.shape} for {n_rows} rows of "
                            f"{units} units (or a non-finite value)")
        out[k] = (part, constant)
    return out
