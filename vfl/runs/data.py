"""What a run takes of one party's rows: the same for every family, the estimators and ``vfl party``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class RoleData:
    """One party's aligned rows, as a run takes them (what :class:`vfl.deploy.data.PartyData` also gives).

    Parameters
    ----------
    columns : list of str
    features : ndarray (rows, columns)
        NaN is a missing value where the family admits one (trees).
    labels : ndarray (rows,), optional
        The label party's labels; None elsewhere.
    weights : ndarray (rows,), optional
        The label party's row weights (``sample_weight``), where the family takes them; None elsewhere.
    ids : list of str, optional
        The rows' ids, to name a row in an error (they never leave the party).
    """

    columns: list
    features: np.ndarray
    labels: np.ndarray | None = None
    weights: np.ndarray | None = None
    ids: list | None = None
