"""Unbalanced private set intersection: a large party's OPRF outputs, computed once, against a small party's queries.

For a large party (a bank, 10^7 ids) and a small one (a partner, 10^4 ids): the large party L evaluates
an X25519 OPRF (:mod:`vfl.crypto.upsi`) with its key ``k`` over its whole set **once**, and keeps the
outputs in an owner-only cache file; the small party S receives those outputs (cut to ``w`` bytes,
sorted) **once** and keeps them in its own cache (:mod:`vfl.protocols.upsi_cache`).  Each run then costs
the small set only.  With one hub (the label party) and K >= 1 spokes, every hub–spoke pair runs::

    Step  Hub                                              Spoke j
    1     -                                                 salt share, row count -> hub  (upsi_hello)
          every salt share and row count -> spokes (upsi_setup); in each pair the party with more rows is
          L (the hub on a tie), the other S
    2     L -> S   key id, L's row count, the output width w (upsi_offer)
          S -> L   whether S needs L's outputs, the width it uses (upsi_want)
          L -> S   only then: F_k(x) for all of L's ids, w bytes each, sorted (upsi_outputs)
    3     S -> L   r·H(y) for S's ids, shuffled, one fresh r for the run (upsi_query)
          L -> S   k·(r·H(y)), every point checked first (upsi_evaluated)
          S        unblinds (X25519 with c ≡ ±r⁻¹), F_k(y); matches against its copy
          S -> L   the matched outputs, sorted (upsi_matches): both now hold the pairwise intersection
    4     keeps its rows every spoke matched, sorted by SHA-256(salt ‖ F of the first pair); tells each spoke
          their positions in that pair's sorted matched outputs (upsi_result)
                                                            maps them to its rows: the common order

What each party learns (semi-honest parties): every row count; in each pair, both parties learn their
pairwise intersection (S by matching, L from ``upsi_matches``: every vfl alignment ends with both sides
knowing the shared rows); L learns how many ids S queried and nothing else about S's ids (it sees
``r·H(y)``, as the hub of the DH PSI sees a spoke's ``b·H(y)``); S holds L's outputs, pseudorandom
without ``k``, and learns which of its own ids are among L's.  With K >= 2 a spoke learns its pairwise
intersection with the hub, not only the final one.  See docs/psi.md.

Bad input is refused before anything is sent (no ids, a repeated id); a peer's points are checked as in
the DH PSI; malformed messages (sizes, order, unsorted or repeated outputs, outputs that match no row)
are a :class:`~vfl.errors.ProtocolError` naming the peer.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from vfl.crypto import group, upsi
from vfl.errors import DataError, ProtocolError
from vfl.protocols import upsi_cache
from vfl.protocols.psi import (by_role, check_unique, final_positions, hub_hellos, hub_setup, recv_all,
                               recv_chunks, spoke_hello, too_small)
from vfl.transport import Endpoint

VERSION = "vfl-upsi-1"
#: Points per message of a query or of its evaluation (1 MiB of points).
CHUNK_IDS = 1 << 15
#: Outputs per message when the small party fetches the large party's outputs.
OUTPUT_CHUNK = 1 << 17
_SALT_TAG = b"vfl-upsi-1/salt"
_ORDER_TAG = b"vfl-upsi-1/order"

OnProgress = Callable[[int, int], None]
Note = Callable[[str], None]

#: What each message carries, by sender (either side of a pair may be the large party).
MESSAGES = {
    ("feature", "upsi_hello"): "the protocol's version, its share of the salt and its row count",
    ("label", "upsi_setup"): "every party's salt share and row count (or why the run stops: too few rows)",
}
for _role in ("label", "feature"):
    MESSAGES.update({
        (_role, "upsi_offer"): "as the larger party: its OPRF key's public id, its row count and the output width",
        (_role, "upsi_want"): "as the smaller party: whether it needs the larger party's outputs, and their width",
        (_role, "upsi_outputs"): "as the larger party: its OPRF outputs F_k(x), cut and sorted (once per key)",
        (_role, "upsi_query"): "as the smaller party: its ids as r·H(id), shuffled, blinded by a scalar r only it knows",
        (_role, "upsi_evaluated"): "as the larger party: k·(r·H(id)) for each point queried, in its order",
        (_role, "upsi_matches"): "as the smaller party: how many of its ids matched (the pairwise intersection's size)",
        (_role, "upsi_match_chunk"): "as the smaller party: the outputs that matched, sorted, in chunks",
    })
MESSAGES[("label", "upsi_result")] = ("the size of the intersection and which of the spoke's matched outputs are in "
                                      "it, in the common order")


class _Pair:
    """What one hub–spoke pair ends with: this party's matched rows and their outputs, both in the outputs' order."""

    def __init__(self, rows: np.ndarray, outputs: np.ndarray):
        self.rows, self.outputs = rows, outputs


class _State:
    """One party's run: its ids, cache folder, the large-party cache once loaded, and what it reports."""

    def __init__(self, ep: Endpoint, ids: Sequence[bytes], cache_dir, note: Note | None, report: dict | None,
                 on_progress: OnProgress | None):
        self.ep, self.cache_dir = ep, Path(cache_dir)
        self.ids, self.digest = _checked_ids(ids, ep.role, self.cache_dir)
        self.report = report if report is not None else {}
        self.report.update({"built": False, "fetched": [], "notes": [], "large": {}})
        self.own: upsi_cache.OwnCache | None = None
        self.on_progress, self.done, self.total = on_progress, 0, 0

        def say(text: str) -> None:
            self.report["notes"].append(text)
            if note is not None:
                note(text)
        self.note = say

    def own_cache(self) -> upsi_cache.OwnCache:
        if self.own is None:
            self.own = upsi_cache.load_own(self.cache_dir, self.ep.role, self.ids, self.note, self.digest)
            self.report["built"] = self.own.built
        return self.own

    def progress(self, n: int) -> None:
        self.done += n
        if self.on_progress:
            self.on_progress(self.done, self.total)


def _checked_ids(ids: Sequence[bytes], party: str, cache_dir) -> tuple[list[bytes], str]:
    """The ids as bytes and their set digest; refuses no ids and a repeated id, naming the party.

    The repeat check (a second or two at 10^7 ids) is skipped when the ids are exactly those the party's
    own OPRF cache was built over (the same digest: they were checked then).
    """
    ids = ids if type(ids) is list else list(ids)
    if not ids:
        raise DataError(f"party {party}: no ids to intersect")
    try:
        digest = upsi_cache.set_digest(ids)
    except TypeError:               # not all bytes-like: convert (or refuse) each, as before
        ids = list(map(bytes, ids))
        digest = upsi_cache.set_digest(ids)
    if upsi_cache.recorded_digest(cache_dir) != digest:
        if not all(type(i) is bytes for i in ids):
            ids = list(map(bytes, ids))
        check_unique(ids, party)
    return ids, digest


def large_party(sizes: dict[str, int], hub: str, spoke: str) -> str:
    """The pair's large party (the OPRF key holder): the one with more rows; the hub on a tie."""
    return hub if sizes[hub] >= sizes[spoke] else spoke


def _shuffle(n: int) -> np.ndarray:
    """A uniformly random permutation from the OS CSPRNG (sorting distinct random 64-bit keys)."""
    while True:
        keys = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        order = np.argsort(keys, kind="stable")
        if n < 2 or np.all(keys[order][1:] != keys[order][:-1]):
            return order


def _send_chunks(ep: Endpoint, peer: str, name: str, data: bytes, width: int, per: int) -> None:
    step = width * per
    for lo in range(0, len(data), step):
        ep.send(peer, name, "masked", start=lo // width, data=data[lo:lo + step])


def _checked(ep: Endpoint, peer: str, name: str, start: int, fn, *args) -> bytes:
    try:
        return fn(*args)
    except group.InvalidPointError as exc:
        raise ProtocolError(f"{ep.role}: {peer} sent an invalid point (item {start + exc.index} of {name!r}): not "
                            "the u-coordinate of a point of large order on Curve25519 (not canonical, on the "
                            "twist, or of small order); stopping") from None


def _sorted(values: np.ndarray, strict: bool) -> bool:
    if len(values) < 2:
        return True
    return bool(np.all(values[1:] > values[:-1]) if strict else np.all(values[1:] >= values[:-1]))


# -- one pair, from either side --------------------------------------------------------------------
def _as_large(st: _State, peer: str, n_small: int) -> _Pair:
    ep = st.ep
    own = st.own_cache()
    n = len(st.ids)
    width = upsi.output_width(n, n_small)
    ep.send(peer, "upsi_offer", "public", version=VERSION, key_id=own.key_id, rows=n, width=width)
    want = ep.recv(peer, "upsi_want")
    used = want["width"]
    if type(want["fetch"]) is not bool or type(used) is not int or not width <= used <= upsi.FULL_BYTES:
        raise ProtocolError(f"{ep.role}: {peer} sent a malformed 'upsi_want' (width {used!r}, needed {width}..."
                            f"{upsi.FULL_BYTES})")
    if want["fetch"]:
        _send_chunks(ep, peer, "upsi_outputs", own.prefixes(used).tobytes(), used, OUTPUT_CHUNK)
    for start, points in recv_chunks(ep, peer, "upsi_query", n_small, group.POINT_BYTES):
        evaluated = _checked(ep, peer, "upsi_query", start, upsi.evaluate, points, own.key)
        ep.send(peer, "upsi_evaluated", "masked", start=start, data=evaluated)
        st.progress(len(points) // group.POINT_BYTES)
    count = ep.recv(peer, "upsi_matches")["count"]
    if type(count) is not int or not 0 <= count <= n_small:
        raise ProtocolError(f"{ep.role}: {peer} sent a malformed 'upsi_matches'")
    outputs = np.frombuffer(recv_all(ep, peer, "upsi_match_chunk", count, used), dtype=f"S{used}")
    if not _sorted(outputs, strict=True):
        raise ProtocolError(f"{ep.role}: {peer} sent matched outputs that are not sorted and distinct")
    at, found, ambiguous = own.find(outputs)
    if not found.all():
        raise ProtocolError(f"{ep.role}: {peer} sent {int((~found).sum())} matched outputs that are none of "
                            f"{ep.role}'s; stopping")
    if ambiguous.any():
        raise DataError(f"{ep.role}: two of its ids share a matched {used}-byte output (a 2^-40 event); run again "
                        f"after removing {own.path} (a fresh key)")
    return _Pair(own.rows[at].astype(np.int64), outputs)


def _as_small(st: _State, peer: str, n_large: int) -> _Pair:
    ep = st.ep
    n = len(st.ids)
    offer = ep.recv(peer, "upsi_offer")
    key_id, rows, width = offer["key_id"], offer["rows"], offer["width"]
    if offer["version"] != VERSION:
        raise ProtocolError(f"{ep.role}: {peer} runs unbalanced PSI {offer['version']!r}, not {VERSION!r}")
    if not isinstance(key_id, bytes) or len(key_id) != upsi.KEY_ID_BYTES or rows != n_large \
            or type(width) is not int or not upsi.output_width(n_large, n) <= width <= upsi.FULL_BYTES:
        raise ProtocolError(f"{ep.role}: {peer} sent a malformed 'upsi_offer' (rows {rows!r} of {n_large}, "
                            f"width {width!r})")
    copy = upsi_cache.load_peer(st.cache_dir, ep.role, peer, key_id, n_large, width, st.note)
    used = width if copy is None else copy.width
    ep.send(peer, "upsi_want", "public", fetch=copy is None, width=used)
    if copy is None:
        outputs = np.frombuffer(recv_all(ep, peer, "upsi_outputs", n_large, used), dtype=f"S{used}")
        if not _sorted(outputs, strict=False):
            raise ProtocolError(f"{ep.role}: {peer} sent its outputs out of order; stopping")
        copy = upsi_cache.write_peer(st.cache_dir, ep.role, peer, key_id, outputs)
        st.report["fetched"].append(peer)

    order = _shuffle(n)
    r, c = upsi.blinding()
    seeds, points = upsi.query([st.ids[i] for i in order], key_id, r)
    _send_chunks(ep, peer, "upsi_query", points, group.POINT_BYTES, CHUNK_IDS)
    unblinded = bytearray()
    for start, data in recv_chunks(ep, peer, "upsi_evaluated", n, group.POINT_BYTES):
        unblinded += _checked(ep, peer, "upsi_evaluated", start, upsi.unblind, data, c)
        st.progress(len(data) // group.POINT_BYTES)
    mine = np.frombuffer(upsi.finalize(seeds, bytes(unblinded), used), dtype=f"S{used}")
    table = copy.outputs
    at = np.searchsorted(table, mine)
    hit = at < len(table)
    hit[hit] = table[at[hit]] == mine[hit]
    positions = np.nonzero(hit)[0]
    by_output = np.argsort(mine[positions], kind="stable")
    outputs, rows = mine[positions][by_output], order[positions][by_output].astype(np.int64)
    if not _sorted(outputs, strict=True):
        raise DataError(f"{ep.role}: two of its ids share a {used}-byte output (a 2^-40 event); run again after "
                        f"removing {copy.path}")
    ep.send(peer, "upsi_matches", "masked", count=len(outputs))
    _send_chunks(ep, peer, "upsi_match_chunk", outputs.tobytes(), used, OUTPUT_CHUNK)
    return _Pair(rows, outputs)


def _pair(st: _State, peer: str, large: str, sizes: dict[str, int]) -> _Pair:
    if large == st.ep.role:
        st.report["large"][peer] = st.ep.role
        return _as_large(st, peer, sizes[peer])
    st.report["large"][peer] = peer
    return _as_small(st, peer, sizes[peer])


def _salt(shares: Sequence[bytes]) -> bytes:
    return hashlib.sha256(_SALT_TAG + b"".join(sorted(shares))).digest()


# -- the hub and a spoke ------------------------------------------------------------------------------------
def run_hub(ep: Endpoint, ids: Sequence[bytes], spokes: Sequence[str], min_rows: int = 1,
            on_progress: OnProgress | None = None, sizes_out: dict | None = None, *, cache_dir,
            note: Note | None = None, report: dict | None = None) -> np.ndarray:
    """The hub's program (see :func:`align_rows`)."""
    spokes = list(spokes)
    if not spokes or len(set(spokes)) != len(spokes) or ep.role in spokes:
        raise ValueError("the hub needs one or more distinct spokes other than itself")
    st = _State(ep, ids, cache_dir, note, report, on_progress)
    ids = st.ids
    sizes, shares = hub_hellos(ep, spokes, len(ids), "upsi", VERSION, sizes_out)
    hub_setup(ep, spokes, "upsi", sizes, shares, too_small(sizes, min_rows))
    st.total = sum(min(sizes[ep.role], sizes[s]) for s in spokes)

    pairs = {spoke: _pair(st, spoke, large_party(sizes, ep.role, spoke), sizes) for spoke in spokes}
    common = None
    for pair in pairs.values():
        common = np.sort(pair.rows) if common is None else np.intersect1d(common, pair.rows, assume_unique=True)
    first = pairs[spokes[0]]
    by_row = np.argsort(first.rows)
    keys_of = first.outputs[by_row][np.searchsorted(first.rows[by_row], common)]
    salt = _salt(shares)
    raw, width = keys_of.tobytes(), keys_of.dtype.itemsize     # (tolist() would drop trailing zero bytes)
    keys = [hashlib.sha256(_ORDER_TAG + salt + raw[i:i + width]).digest() for i in range(0, len(raw), width)]
    common = common[np.argsort(np.array(keys, dtype="S32"), kind="stable")] if len(common) else common
    refusal = too_small(sizes, min_rows, len(common))
    for spoke, pair in pairs.items():
        by_row = np.argsort(pair.rows)
        positions = by_row[np.searchsorted(pair.rows[by_row], common)]
        ep.send(spoke, "upsi_result", "masked", refusal=refusal or "", size=len(common),
                positions=np.zeros(0, np.int64) if refusal else positions.astype(np.int64))
    if refusal:
        raise DataError(f"{ep.role}: {refusal}")
    return common.astype(np.int64)


def run_spoke(ep: Endpoint, ids: Sequence[bytes], hub: str, min_rows: int = 1,
              on_progress: OnProgress | None = None, sizes_out: dict | None = None, *, cache_dir,
              note: Note | None = None, report: dict | None = None) -> np.ndarray:
    """A spoke's program (see :func:`align_rows`)."""
    st = _State(ep, ids, cache_dir, note, report, on_progress)
    ids = st.ids
    sizes, _, _ = spoke_hello(ep, hub, len(ids), "upsi", VERSION, min_rows, sizes_out)
    st.total = min(sizes[hub], len(ids))
    pair = _pair(st, hub, large_party(sizes, hub, ep.role), sizes)
    result = ep.recv(hub, "upsi_result")
    positions = final_positions(ep, hub, result, len(pair.rows), sizes, min_rows, "upsi_result")
    return pair.rows[positions]


def align_rows(ep: Endpoint, ids: Sequence[bytes], hub: str, spokes: Sequence[str], min_rows: int = 1,
               on_progress: OnProgress | None = None, sizes_out: dict | None = None, *, cache_dir,
               note: Note | None = None, report: dict | None = None) -> np.ndarray:
    """Run this endpoint's role of the unbalanced PSI (hub if ``ep.role == hub``, else a spoke).

    ``ep``, ``ids``, ``hub``, ``spokes``, ``min_rows`` and ``sizes_out`` as for the DH protocol's
    :func:`vfl.protocols.psi.align_rows`; ``on_progress(done, total)`` counts the queried points evaluated or
    unblinded.

    Parameters
    ----------
    cache_dir : path
        This party's own cache folder (owner-only files; :mod:`vfl.protocols.upsi_cache`).
    note : callable, optional
        ``note(text)`` for what the run does with the caches (built, fetched, stale, naming the files).
    report : dict, optional
        Receives ``built`` (whether this party evaluated the OPRF over its whole set in this run),
        ``fetched`` (the peers whose outputs it fetched), ``large`` (per peer, the pair's large party)
        and ``notes``.

    Returns
    -------
    numpy.ndarray
        This party's rows (positions in ``ids``) in the intersection, in the order common to all parties.
    """
    options = {"cache_dir": cache_dir, "note": note, "report": report}
    return by_role(ep, hub, spokes, lambda: run_hub(ep, ids, spokes, min_rows, on_progress, sizes_out, **options),
                   lambda: run_spoke(ep, ids, hub, min_rows, on_progress, sizes_out, **options))


def prepare(ids: Sequence[bytes], party: str, cache_dir, note: Note | None = None) -> dict:
    """The offline phase ahead of any run: the large party's key and outputs over its ids, built if not current.

    Returns ``{"path", "rows", "built"}``.
    """
    ids, digest = _checked_ids(ids, party, cache_dir)
    own = upsi_cache.load_own(cache_dir, party, ids, note, digest)
    return {"path": str(own.path), "rows": len(ids), "built": own.built}
