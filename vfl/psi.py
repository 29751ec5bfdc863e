"""Align the parties' rows by private set intersection, in one process: for teaching, tests and notebooks.

::

    import vfl.psi
    aligned = vfl.psi.intersect({"A": frame_a, "B": frame_b}, id_column="id", label="y")
    data = vfl.VerticalDataset(aligned, label="y", id_column="id")

:func:`intersect` runs the same Diffie–Hellman PSI the parties run over the
network (:mod:`vfl.protocols.psi`), or with ``protocol="kkrt"`` KKRT's
OPRF-based PSI (:mod:`vfl.protocols.psi_kkrt`), one thread per party over the
in-process transport, and returns each party's own rows of the intersection in
the order common to all of them.  The hub is the label party; every other
party is a spoke.  With ``protocol="unbalanced"`` it runs the unbalanced PSI
(:mod:`vfl.protocols.psi_unbalanced`: a large party's OPRF outputs computed
once and cached, a small party's ids queried each run), each party's cache in
``cache_dir/PARTY``.  See docs/psi.md for the protocols and what each party learns.

Ids are compared in a canonical form (:func:`canonical_id`, from
:mod:`vfl.datachecks`, which ``vfl party`` uses too): text stripped of
surrounding whitespace and NFC-normalized, integers and integral floats as
their decimal digits, so ``" 7 "``, ``7``, ``7.0`` and ``"7.0"`` are the same
id; a blank id is refused.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Mapping

import numpy as np
import pandas as pd

from vfl.crypto import group
from vfl.datachecks import canonical_id, canonical_ids, check_id_column
from vfl.errors import DataError
from vfl.protocols import psi_kkrt, psi_unbalanced
from vfl.protocols.psi import align_rows, check_unique
from vfl.transport import Endpoint, InProcessNetwork, Transcript, run_roles

#: canonical_id and canonical_ids live in vfl.datachecks (shared with ``vfl party``); kept here by name.
__all__ = ["PROTOCOLS", "canonical_id", "canonical_ids", "intersect"]

#: The PSI protocols, by name: Diffie–Hellman on Curve25519, KKRT's OPRF on OT extension, and the unbalanced PSI
#: (a cached OPRF).
PROTOCOLS = {"dh": align_rows, "kkrt": psi_kkrt.align_rows, "unbalanced": psi_unbalanced.align_rows}


def _hub(frames: Mapping[str, pd.DataFrame], label: str | None, label_party: str | None) -> str:
    if label_party is not None:
        if label_party not in frames:
            raise DataError(f"label party {label_party!r} is not one of the parties {sorted(frames)}")
        if label is not None and label not in frames[label_party].columns:
            raise DataError(f"party {label_party}: label column {label!r} is missing")
        return label_party
    if label is None:
        raise DataError("name the label party (the hub): pass label=<the label column> or "
                        "label_party=<party name>")
    holders = [p for p, f in frames.items() if label in f.columns]
    if len(holders) != 1:
        where = "no party" if not holders else "parties " + ", ".join(holders)
        raise DataError(f"the label column {label!r} must be held by exactly one party; {where} holds it")
    return holders[0]


def intersect(frames: Mapping[str, pd.DataFrame], id_column: str, label: str | None = None,
              label_party: str | None = None, min_rows: int = 1, progress: bool = False,
              transcript: Transcript | None = None, protocol: str = "dh",
              cache_dir=None) -> dict[str, pd.DataFrame]:
    """Each party's rows of the private set intersection, in one common order.

    Parameters
    ----------
    frames : mapping of str to pandas.DataFrame
        Two or more parties' frames, by party name; each holds ``id_column``.
    id_column : str
        The column of ids (text or integers; see :func:`canonical_id`).
    label : str, optional
        The label column: the party holding it is the hub.
    label_party : str, optional
        The label party (the hub) by name: for prediction data, which has no label column.
    min_rows : int
        Fewest rows the intersection may have (what a training batch needs);
        smaller raises a :class:`~vfl.errors.DataError` naming the sizes.
    progress : bool
        Show a progress bar per party on stderr.
    transcript : Transcript, optional
        Records every message (pass ``Transcript(keep_payloads=True)`` to inspect them).
    protocol : {"dh", "kkrt", "unbalanced"}
        ``"dh"``: the Diffie–Hellman PSI (:mod:`vfl.protocols.psi`); ``"kkrt"``: KKRT's OPRF-based PSI
        (:mod:`vfl.protocols.psi_kkrt`); ``"unbalanced"``: the unbalanced PSI (:mod:`vfl.protocols.psi_unbalanced`),
        the larger party of each pair evaluating its OPRF once.  The last two run pairwise between the hub and each
        spoke.  All give the same rows.
    cache_dir : path, optional
        ``"unbalanced"``: where each party keeps its cache files, in ``cache_dir/PARTY`` (owner-only);
        without it a temporary folder, removed afterwards (nothing reused).

    Returns
    -------
    dict of str to pandas.DataFrame
        Per party, its rows of the intersection in the common order, with a
        fresh ``RangeIndex`` and ``id_column`` holding the canonical ids (text),
        so the aligned frames hold equal ids row by row.  Each frame's ``attrs["psi"]`` records the
        row counts, the shared count, the protocol, the X25519 engine that ran for ``"dh"`` and ``"unbalanced"``
        (``curve_engine``: Intel's multi-buffer ladder or libsodium, and if libsodium, why; see docs/psi.md) and,
        for ``"unbalanced"``, what the party did with its caches (``cache``).

    Raises
    ------
    DataError
        A missing id column, a missing, boolean or duplicate id (naming the
        party and rows), or an intersection smaller than ``min_rows``.
    """
    if not isinstance(frames, Mapping) or len(frames) < 2:
        raise DataError("intersect needs a mapping of two or more party names to DataFrames")
    if isinstance(min_rows, bool) or not isinstance(min_rows, (int, np.integer)) or min_rows < 1:
        raise DataError(f"min_rows must be a positive integer, got {min_rows!r}")
    if protocol not in PROTOCOLS:
        raise DataError(f"protocol must be one of {sorted(PROTOCOLS)}, got {protocol!r}")
    if protocol == "unbalanced":
        if cache_dir is None:
            with tempfile.TemporaryDirectory(prefix="vfl-upsi-") as folder:
                return intersect(frames, id_column, label, label_party, min_rows, progress, transcript, protocol,
                                 folder)
        reports = {str(p): {} for p in frames}
        align = {str(p): (lambda *a, p=str(p): psi_unbalanced.align_rows(
            *a, cache_dir=Path(cache_dir) / p, report=reports[p],
            note=(lambda text: print(text, file=sys.stderr)) if progress else None)) for p in frames}
    else:
        align = {str(p): PROTOCOLS[protocol] for p in frames}
    names = [str(party) for party in frames]             # party names as VerticalDataset gives them: text
    if len(set(names)) < len(names):
        raise DataError(f"intersect: two parties have the same name as text: {sorted(names)}")
    frames = dict(zip(names, frames.values()))
    label_party = None if label_party is None else str(label_party)
    for party, frame in frames.items():
        if not isinstance(frame, pd.DataFrame):
            raise DataError(f"party {party}: expected a pandas DataFrame, got {type(frame).__name__}")
        check_id_column(f"party {party}", frame.columns, id_column)
    hub = _hub(frames, label, label_party)
    spokes = [p for p in frames if p != hub]
    ids = {p: [i.encode("utf-8") for i in canonical_ids(f[id_column], f"party {p}", id_column)]
           for p, f in frames.items()}
    for party, values in ids.items():
        check_unique(values, party)

    roles = list(frames)
    network = InProcessNetwork(roles)
    transcript = transcript if transcript is not None else Transcript()
    bars = _bars(roles, progress)
    endpoints = {r: Endpoint(network.transport(r), [p for p in roles if p != r], transcript) for r in roles}
    try:
        rows = run_roles(network, {
            r: (lambda r=r: align[r](endpoints[r], ids[r], hub, spokes, int(min_rows), bars.get(r)))
            for r in roles})
    finally:
        for bar in bars.values():
            bar.close()
    record = {"protocol": protocol}
    if protocol in ("dh", "unbalanced"):
        record["curve_engine"] = group.engine_record()
    aligned = {}
    for party, frame in frames.items():
        out = frame.iloc[rows[party]].reset_index(drop=True)
        out[id_column] = [ids[party][i].decode("utf-8") for i in rows[party]]
        out.attrs["psi"] = {"rows": {p: len(v) for p, v in ids.items()}, "shared": int(len(rows[party])),
                            **record}
        if protocol == "unbalanced":
            out.attrs["psi"]["cache"] = reports[party]
        aligned[party] = out
    return aligned


class _Bar:
    """A tqdm bar fed ``(done, total)``."""

    def __init__(self, party: str, position: int):
        from tqdm import tqdm

        self.bar = tqdm(desc=f"PSI {party}", unit="id", unit_scale=True, position=position, leave=False,
                        file=sys.stderr, mininterval=0.5)

    def __call__(self, done: int, total: int) -> None:
        if self.bar.total != total:
            self.bar.total = total
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        self.bar.close()


def _bars(roles, progress: bool) -> dict:
    return {r: _Bar(r, i) for i, r in enumerate(roles)} if progress else {}
