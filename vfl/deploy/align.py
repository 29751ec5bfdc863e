"""Aligning the parties' rows before training or prediction: by private set intersection, or same ids.

With ``[data] align = "psi"`` (the default) each party brings its own CSV, with
its own ids in its own order; the label party (hub) and every feature party
(spoke) run the Diffie–Hellman PSI of :mod:`vfl.protocols.psi` over the
session's links, and each keeps its rows of the intersection, ordered by id
(every party holds the same ids, so the same order; no party chooses it, and
a resumed run finds the same order again).  No id leaves its owner; every party learns the others'
row counts and how many rows are shared (see docs/psi.md).  The coordinator
takes no part.  With ``align = "same-ids"`` every CSV must hold the same ids,
which the parties check by a salted digest instead.

With ``[data] psi_backend = "secretflow-rr22"`` SecretFlow's engine computes
each hub–spoke pairwise intersection instead (:mod:`vfl.protocols.psi_secretflow`,
its own brpc links with the parties' certificates); vfl keeps the ids, the
checks, the refusal, the order and the narration.  With ``[data] psi_protocol = "kkrt"`` vfl's own
PSI is KKRT's OPRF on OT extension (:mod:`vfl.protocols.psi_kkrt`) instead of Diffie–Hellman: the same
rows, the same order, far less CPU per id, more bytes on the wire.  With ``psi_protocol = "unbalanced"``
it is the unbalanced one (:mod:`vfl.protocols.psi_unbalanced`): in each pair the larger party's OPRF
outputs are computed once and kept, with the smaller party's copy, in ``WORKDIR/psi-cache``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from vfl.deploy.jsonfile import write_private_csv
from vfl.crypto import group
from vfl.deploy.commands import party_workdir
from vfl.deploy.config import FederationConfig
from vfl.deploy.data import PartyData
from vfl.protocols import psi_kkrt, psi_secretflow, psi_unbalanced
from vfl.protocols.psi import align_rows


def min_rows(batch_size: int | None, n_weights: int) -> int:
    """The fewest shared rows a party can train on: a batch, and more rows than its weights."""
    return max(batch_size or 1, n_weights + 1)


def private_intersection(endpoint, config: FederationConfig, role: str, data: PartyData, needed: int,
                         narrator=None, bar=None, workdir=None) -> tuple[PartyData, dict]:
    """This party's rows of the intersection, in the common order, and what it learned: every row count.

    ``workdir`` (default ``./vfl-ROLE``, as ``vfl party``'s): the unbalanced PSI keeps its caches in its
    ``psi-cache`` folder.
    """
    roster = config.roster
    sizes: dict[str, int] = {}
    on_progress = None
    if bar is not None:
        def on_progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()
    if config.psi_backend == psi_secretflow.BACKEND:
        links = psi_secretflow.EngineLinks(config.engine_addresses(), config.tls(role),
                                           config.network.connect_timeout, config.timeout)
        rows = psi_secretflow.align_rows(endpoint, data.id_bytes(), roster.label, roster.features, needed, links,
                                         sizes)
    elif config.psi_protocol == "unbalanced":
        cache = {}
        folder = party_workdir(workdir, role) / "psi-cache"
        rows = psi_unbalanced.align_rows(endpoint, data.id_bytes(), roster.label, roster.features, needed,
                                         on_progress, sizes, cache_dir=folder, report=cache,
                                         note=narrator.say if narrator is not None else None)
    else:
        align = psi_kkrt.align_rows if config.psi_protocol == "kkrt" else align_rows
        rows = align(endpoint, data.id_bytes(), roster.label, roster.features, needed, on_progress, sizes)
    # In id order (the CSV was read sorted by id): the same order at every party, chosen by none of them,
    # and the same in every run, so a resumed run meets its rows in the order it left them.
    rows = np.sort(rows)
    report = {"rows": sizes, "shared": int(len(rows))}
    if config.psi_backend != "vfl":
        report["backend"] = config.psi_backend
    elif config.psi_protocol == "kkrt":
        report["protocol"] = "kkrt"
    elif config.psi_protocol == "unbalanced":
        report["protocol"] = "unbalanced"
        report["cache"] = {"built": cache["built"], "fetched": cache["fetched"], "large": cache["large"]}
        report["curve_engine"] = group.engine_record()
    else:
        report["curve_engine"] = group.engine_record()
    if narrator is not None:
        narrator.say(alignment_line(role, report))
    return data.take(rows), report


def alignment_line(role: str, report: dict) -> str:
    """``"party telco: aligned by private set intersection: bank 800 rows, telco 1,000 rows; 700 shared"``.

    With SecretFlow's engine the line says so: ``"... by private set intersection (SecretFlow RR22): ..."``,
    and with KKRT's protocol: ``"... (KKRT): ..."``.
    """
    counts = ", ".join(f"{name} {n:,} rows" for name, n in sorted(report["rows"].items()))
    how = " (SecretFlow RR22)" if report.get("backend") == psi_secretflow.BACKEND else \
        " (KKRT)" if report.get("protocol") == "kkrt" else \
        " (unbalanced)" if report.get("protocol") == "unbalanced" else ""
    return f"party {role}: aligned by private set intersection{how}: {counts}; {report['shared']:,} shared"


def write_aligned(path, data: PartyData, id_column: str, label: str | None = None) -> Path:
    """This party's aligned rows as a CSV: the id column, its columns (and the label), in the common order."""
    frame = pd.DataFrame(data.features, columns=data.columns)
    frame.insert(0, id_column, data.ids)
    if label is not None and data.labels is not None:
        frame[label] = data.labels
    return write_private_csv(frame, path, index=False)
