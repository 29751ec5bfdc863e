"""A feature party of the WOE/IV step: its binned columns, encrypted event counts, and (opt-in) its WOE values.

It never sees a label.  From the label party it receives each row's class,
one-hot, encrypted under the label party's key (one ciphertext per row, in
chunks of rows); it multiplies every row's ciphertext into its bin of every
column (one multiplication per row per column), so that each bin's product
is the encryption of the bin's count of every class.  It sends these counts
column by column, **the bins of every column in a fresh random order** (so the
label party knows a bin only as "column j, its bin number k", never its
values or rank), combined many to a ciphertext and re-randomized.

Then it learns which of its columns are selected and, only if the federation
shares WOE values (``share_woe``), each bin's WOE in that same order, which it
maps back to its own bins: that is, each bin's event rate.
"""

from __future__ import annotations

import secrets

import numpy as np

from vfl.crypto import Context, FixedPoint, PublicKey
from vfl.crypto.histogram import bucket_products
from vfl.crypto.slots import Group, combine
from vfl.errors import ProtocolError
from vfl.parties.binning import Binner
from vfl.parties.binning import flat_bins, offsets

_RANDOM = secrets.SystemRandom()


class WOEFeatureParty:
    """One feature party's state in the WOE/IV step.

    Parameters
    ----------
    codes : int array (rows, columns)
        Its aligned rows' bin codes (:meth:`Binner.transform`).
    binner : Binner
        The fitted binning of its columns (its thresholds never leave it).
    role : str
    columns : list of str, optional
    """

    def __init__(self, codes, binner: Binner, role: str = "A", columns=None):
        self.role = role
        self.binner = binner
        self.codes = np.asarray(codes)
        self.n_rows, n_columns = self.codes.shape
        self.columns = list(columns) if columns is not None else [f"x{j}" for j in range(n_columns)]
        self.sizes = np.asarray(binner.n_bins_, dtype=np.int64) + 1      # every column's bins, missing last
        self.offsets = offsets(binner.n_bins_)
        self.flat = flat_bins(self.codes, binner.n_bins_, binner.missing_code)
        self.context: Context | None = None
        #: after a selection with a correlation bound: what this party learnt of the correlations
        self.correlation = None
        #: per column, the order its bins were sent in: sent position k is bin order[j][k]
        self.orders: list[np.ndarray] = []
        #: per column, whether the label party selected it (after the plan)
        self.selected: np.ndarray | None = None
        #: per column, the WOE of every bin (own order, missing last), if the federation shares them
        self.woe: list[np.ndarray] | None = None
        self.iv: np.ndarray | None = None

    @property
    def n_columns(self) -> int:
        return len(self.columns)

    def receive_public_key(self, key_bytes: bytes, engine=None) -> None:
        self.context = Context(PublicKey.from_bytes(key_bytes), FixedPoint(), engine=engine)
        self._products = None
        self._rows_seen = 0

    def add_rows(self, ciphertexts: list) -> None:
        """The next chunk of rows' encrypted classes: multiplied into every column's bins."""
        start = self._rows_seen
        if start + len(ciphertexts) > self.n_rows:
            raise ProtocolError(f"{self.role}: encrypted classes for more than its {self.n_rows} rows")
        self._products = bucket_products(self.context.public_key, ciphertexts, self.flat[start:start + len(ciphertexts)],
                                         int(self.offsets[-1]), into=self._products)
        self._rows_seen += len(ciphertexts)

    def counts_to_send(self, group: Group) -> list:
        """Every column's bins' encrypted class counts, column by column, each column's bins shuffled afresh.

        Returns the combined, re-randomized ciphertexts (``group``: one bin's slots).
        """
        if self._rows_seen != self.n_rows:
            raise ProtocolError(f"{self.role}: encrypted classes for {self._rows_seen} of its {self.n_rows} rows")
        self.orders, out = [], []
        for j, size in enumerate(self.sizes.tolist()):
            order = list(range(size))
            _RANDOM.shuffle(order)
            self.orders.append(np.asarray(order, dtype=np.int64))
            start = int(self.offsets[j])
            out += [self._products[start + k] for k in order]
        self._products = None
        return combine(self.context.public_key, self.context.engine, out, group)

    def bin_counts(self) -> list[np.ndarray]:
        """Rows per bin of every column (own order, missing last): its own data, for population stability."""
        return [np.bincount(self.flat[:, j] - self.offsets[j], minlength=size)
                for j, size in enumerate(self.sizes.tolist())]

    def receive_plan(self, selected: np.ndarray) -> None:
        if len(selected) != self.n_columns:
            raise ProtocolError(f"{self.role}: a plan of {len(selected)} columns for its {self.n_columns}")
        self.selected = np.asarray(selected, dtype=bool)

    def receive_woe(self, values: np.ndarray, ivs: np.ndarray) -> None:
        """Every bin's WOE in the order sent (``share_woe``), mapped back to its own bins; each column's IV."""
        if len(values) != int(self.sizes.sum()) or len(ivs) != self.n_columns or not np.all(np.isfinite(values)):
            raise ProtocolError(f"{self.role}: WOE values that do not fit its bins")
        self.woe = []
        for j, order in enumerate(self.orders):
            start = int(self.offsets[j])
            own = np.empty(len(order))
            own[order] = values[start:start + len(order)]
            self.woe.append(own)
        self.iv = np.asarray(ivs, dtype=np.float64)

    def state(self) -> dict:
        """What it keeps after the step (its own): the plan, and the WOE values if shared."""
        return {"selected": None if self.selected is None else self.selected.tolist(),
                "woe": None if self.woe is None else [w.tolist() for w in self.woe],
                "iv": None if self.iv is None else self.iv.tolist()}
