"""The label party of the WOE/IV step: the key pair, the encrypted classes, and every column's WOE and IV.

It encrypts each row's class, one-hot in ``K`` slots of one plaintext
(:func:`~vfl.parties.credit.woe.class_group`), under its own key, and sends the
ciphertexts to every feature party in chunks of rows.  It decrypts what comes
back: each feature party's columns' bins' class counts, the bins in an order
drawn by that party (so it learns counts per anonymous bin, never which values
or which rank a bin stands for).  Its own columns' counts it computes in the
clear.  From the counts, WOE and IV (:mod:`~vfl.parties.credit.woe`), for
every party's columns.
"""

from __future__ import annotations

import gmpy2
import numpy as np

from vfl.crypto import Context, FixedPoint, generate_keypair
from vfl.errors import ProtocolError
from vfl.parties.binning import Binner
from vfl.parties.binning import flat_bins, offsets
from vfl.parties.credit.woe import class_group, class_tables
from vfl.parties.labels import event_classes


class WOELabelParty:
    """The label party's state in the WOE/IV step.

    Parameters
    ----------
    codes : int array (rows, columns)
        Its own aligned rows' bin codes.
    binner : Binner
        Its own columns' binning.
    labels : array (rows,)
        Class values; two or more classes.
    role : str
    columns : list of str, optional

    Attributes
    ----------
    classes : ndarray
        The label's classes, sorted; with two, ``classes[1]`` is the event.
    tables : dict
        Per party (itself included), per column, :func:`~vfl.parties.credit.woe.class_tables`'s
        dict: rows and events per bin, WOE per bin, IV (one per class against the rest,
        or one for two classes).  A feature party's bins are in the order it sent them.
    """

    def __init__(self, codes, binner: Binner, labels, role: str = "B", columns=None):
        self.role = role
        self.binner = binner
        self.codes = np.asarray(codes)
        self.n_rows = len(self.codes)
        self.columns = list(columns) if columns is not None else [f"x{j}" for j in range(self.codes.shape[1])]
        event_classes(labels, role)
        self.classes, self.y = np.unique(np.asarray(labels), return_inverse=True)
        self.group = class_group(len(self.classes), self.n_rows)
        self.context: Context | None = None
        #: after a selection with a correlation bound: what this party learnt of the correlations
        self.correlation = None
        sizes = np.asarray(binner.n_bins_, dtype=np.int64) + 1
        start = offsets(binner.n_bins_)
        flat = flat_bins(self.codes, binner.n_bins_, binner.missing_code)
        self.tables = {role: []}
        for j, size in enumerate(sizes.tolist()):
            counts = np.zeros((size, len(self.classes)), dtype=np.int64)
            np.add.at(counts, (flat[:, j] - start[j], self.y), 1)
            self.tables[role].append(class_tables(counts))

    @property
    def n_classes(self) -> int:
        return len(self.classes)

    def make_keys(self, key_bits: int, insecure: bool = False, engine=None) -> bytes:
        """A fresh key pair (kept here); returns the public key's bytes."""
        public, private = generate_keypair(key_bits, insecure=insecure)
        self.context = Context(public, FixedPoint(), private_key=private, engine=engine)
        return public.to_bytes()

    def encrypt_rows(self, start: int, stop: int) -> list:
        """Fresh ciphertexts of rows ``start:stop``'s classes, one-hot (slot ``c`` holds 1 for class ``c``)."""
        shift = self.group.widths[0]
        plaintexts = [gmpy2.mpz(1) << (shift * int(c)) for c in self.y[start:stop].tolist()]
        return self.context.engine.encrypt(self.context.public_key, plaintexts)

    def receive_counts(self, party: str, ciphertexts: list, sizes) -> None:
        """Decrypt feature party ``party``'s bins' class counts (``sizes``: bins per column, in order)."""
        sizes = [int(s) for s in sizes]
        total = sum(sizes)
        per = self.group.per_plaintext(self.context.public_key.key_bits)
        if len(ciphertexts) != -(-total // per):
            raise ProtocolError(f"{self.role}: {party} sent {len(ciphertexts)} ciphertexts for {total} bins")
        residues = self.context.engine.decrypt(self.context.private_key, ciphertexts)
        counts = self.group.unpack(residues, self.context.public_key.n, total, per)
        if counts.dtype == object or counts.min() < 0:
            raise ProtocolError(f"{self.role}: {party} sent counts that are not counts of rows")
        tables, at = [], 0
        for size in sizes:
            block = counts[at:at + size]
            if int(block.sum()) != self.n_rows:
                raise ProtocolError(f"{self.role}: a column of {party} counts {int(block.sum())} rows, not "
                                    f"{self.n_rows}")
            tables.append(class_tables(block))
            at += size
        self.tables[party] = tables

    def ivs(self, party: str) -> np.ndarray:
        """Each column's IV for selection (two classes: the IV; more: the largest one-vs-rest IV)."""
        return np.asarray([float(np.max(t["iv"])) for t in self.tables[party]])
