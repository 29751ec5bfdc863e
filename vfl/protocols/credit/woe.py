"""WOE and IV of every party's columns: the label party holds the key, feature parties count events per bin.

Read the two programs side by side with the table (every feature party does
what party k does; feature parties never talk to each other)::

    Step  Feature party k                                   Label party
    1     <- public key, row and class counts               make a key pair (its own)
    2     its bins per column -> label
    3     <- [[one-hot class]] per row, in chunks of rows   encrypt each row's class once, for every k
          multiply each row's ciphertext into its bin of
          every column (one multiplication per row and column)
    4     every column's bins' [[class counts]], each       decrypt: class counts per anonymous bin;
          column's bins in a fresh random order, combined   WOE and IV of every column of every party
          many to a ciphertext, re-randomized -> label      (its own columns' in the clear)
    later (after selection, :func:`send_plan` / :func:`receive_plan`):
    5     <- which of its columns are selected; with        -
          share_woe, every bin's WOE (in its sent order)
          and each column's IV

What each party learns: the label party, per feature-party column, the rows
and events of every bin, the bins in an order it cannot map to values or
ranks (and the number of bins per column); a feature party, nothing but
ciphertexts and, at the end, which of its columns are selected (with
``share_woe``: its bins' WOE values, hence each bin's event rate).  See
docs/credit_scoring.md.
"""

from __future__ import annotations

import numpy as np

from vfl.crypto import check_key_bits
from vfl.errors import ConfigurationError, DataError, ProtocolError
from vfl.parties.credit.feature_party import WOEFeatureParty
from vfl.parties.credit.label_party import WOELabelParty
from vfl.parties.credit.woe import class_group
from vfl.protocols.fields import bits, ciphertexts, count, ints, received, unbits
from vfl.protocols.roster import Roster
from vfl.transport import Endpoint

#: Rows per ``classes`` message (8 MiB of 2048-bit ciphertexts): bounded memory and frames, and the
#: feature parties sum one chunk while the label party encrypts the next.
CHUNK_ROWS = 16_384
#: The most classes (one-vs-rest) and bins per column a peer may announce.
MAX_CLASSES = 64
MAX_BINS_PER_COLUMN = 1 << 16


def check_key(key_bits, insecure) -> None:
    if not isinstance(insecure, bool):
        raise ConfigurationError(f"insecure must be True or False, got {insecure!r}")
    check_key_bits(key_bits, insecure)


def woe_feature(ep: Endpoint, party: WOEFeatureParty, roster: Roster, engine=None) -> WOEFeatureParty:
    """A feature party's steps 1-4: it learns nothing (ciphertexts only)."""
    b = roster.label
    start = ep.recv(b, "woe_start")
    party.receive_public_key(start["key"], engine)
    n_rows, n_classes, chunk = count(start, "n_rows"), count(start, "n_classes", MAX_CLASSES + 1), \
        count(start, "chunk_rows")
    if n_rows != party.n_rows:
        raise DataError(f"party {party.role} has {party.n_rows} rows but party {b} has {n_rows}; the parties' rows "
                        "must be aligned")
    if n_classes < 2 or chunk < 1:
        raise ProtocolError(f"{party.role}: {b} sent a malformed 'woe_start'")
    ep.send(b, "bins", "public", sizes=party.sizes.astype(np.int64))
    for lo in range(0, n_rows, chunk):
        party.add_rows(received(party, ep.recv(b, "classes"), min(chunk, n_rows - lo)))
    group = class_group(n_classes, n_rows)
    ep.send(b, "counts", "ciphertext", **ciphertexts(party, party.counts_to_send(group)))
    return party


def woe_label(ep: Endpoint, party: WOELabelParty, roster: Roster, key_bits: int = 2048, insecure: bool = False,
              engine=None, chunk_rows: int = CHUNK_ROWS) -> WOELabelParty:
    """The label party's steps 1-4: WOE and IV of every party's columns (``party.tables``)."""
    check_key(key_bits, insecure)
    key = party.make_keys(key_bits, insecure, engine)
    features = roster.features
    for k in features:
        ep.send(k, "woe_start", "public", key=key, n_rows=party.n_rows, n_classes=party.n_classes,
                chunk_rows=chunk_rows)
    sizes = {k: ints(ep.recv(k, "bins"), "sizes", 1, MAX_BINS_PER_COLUMN) for k in features}
    for lo in range(0, party.n_rows, chunk_rows):
        fields = ciphertexts(party, party.encrypt_rows(lo, min(lo + chunk_rows, party.n_rows)))
        for k in features:
            ep.send(k, "classes", "ciphertext", **fields)
    for k in features:
        party.receive_counts(k, received(party, ep.recv(k, "counts")), sizes[k])
    return party


def send_plan(ep: Endpoint, party: WOELabelParty, roster: Roster, selected: dict, share_woe: bool = False) -> None:
    """Step 5 at the label party: each feature party's own columns' selection (and, ``share_woe``, WOE and IV).

    ``share_woe`` is binary only: a feature party then gets each bin's WOE in the
    order it sent its bins, and each column's IV.
    """
    if share_woe and party.n_classes != 2:
        raise ConfigurationError(f"share_woe gives each feature party its bins' WOE values against one event class; "
                                 f"party {party.role}'s label has {party.n_classes} classes (WOE/IV are then one-vs-rest)")
    for k in roster.features:
        fields = {}
        if share_woe:
            tables = party.tables[k]
            fields = {"woe": np.concatenate([t["woe"][:, 0] for t in tables]).astype(np.float64),
                      "iv": np.asarray([t["iv"][0] for t in tables], dtype=np.float64)}
        ep.send(k, "plan", "plaintext" if share_woe else "public", share_woe=bool(share_woe), **bits(selected[k]),
                **fields)


def receive_plan(ep: Endpoint, party: WOEFeatureParty, roster: Roster, share_woe: bool = False) -> WOEFeatureParty:
    """Step 5 at a feature party: which of its columns are selected (and its WOE values, if shared)."""
    message = ep.recv(roster.label, "plan")
    party.receive_plan(unbits(message, party.n_columns))
    if message["share_woe"] is not bool(share_woe):
        raise ProtocolError(f"{party.role}: {roster.label} sent a plan with share_woe={message['share_woe']!r}, "
                            f"the settings say {share_woe}")
    if share_woe:
        woe, iv = message["woe"], message["iv"]
        if not all(isinstance(v, np.ndarray) and v.dtype == np.float64 and v.ndim == 1 for v in (woe, iv)):
            raise ProtocolError(f"{party.role}: a malformed 'plan' from {roster.label}")
        party.receive_woe(woe, iv)
    return party


# The names before every family's programs were named for their step and role.
run_feature = woe_feature
run_label = woe_label
