"""Entity alignment by Diffie–Hellman private set intersection: one hub, K >= 1 spokes.

The hub (the label party) learns which of its rows every spoke (feature party)
also holds; every party ends with its own rows of the intersection, in one
common order, without any id leaving its owner.  ``H`` hashes an id to a point
of Curve25519 (:mod:`vfl.crypto.group`; blinding is X25519) under the run's
salt; ``a`` is the hub's secret scalar, ``b_j`` spoke j's, all fresh per run::

    Step  Hub                                           Spoke j
    1     -                                             salt share s_j, row count m_j -> hub
          all salt shares and row counts -> spokes      salt = SHA-256(tag, sorted shares)
    2     a·H(x) for its ids, shuffled -> every spoke   b_j·H(y) for its ids, shuffled -> hub
    3     a·(b_j·H(y)), hashed                          b_j·(a·H(x)), hashed -> hub, in the hub's order
    4     matches the two lists per spoke; keeps the rows every spoke matched, sorted by the
          hashed a·b_1·H(x) (which no single party chooses); tells each spoke its positions
          -> spoke j: positions in spoke j's shuffled list, in the common order
                                                        maps them back to its own rows

Only the hub matches.  Points cross the transport in chunks
(:data:`CHUNK_IDS` ids per message); every received point is checked as it
is blinded (:func:`vfl.crypto.group.blind_digests`), and a bad one is a
:class:`~vfl.errors.ProtocolError` naming the peer.  What crosses back at step
3 are 16-byte SHA-256 digests of double-blinded points (keyed with the salt),
not points: nothing to validate, half the bytes.

What each party learns (semi-honest parties, hub and spokes not colluding):

* every party: the row counts of all parties (step 1) and the size of the
  final intersection;
* a spoke: which of its own rows are in the final intersection, in the common
  order, and nothing about the hub's or other spokes' ids outside it — it sees
  only blinded points of the hub's ids;
* the hub: for each spoke j, which of its own rows are in the *pairwise*
  intersection with spoke j (with K >= 2 this is more than the final
  intersection), and how many; nothing about a spoke's ids outside it.  The
  spokes shuffle their points, so the hub does not learn which positions of a
  spoke's file matched, only how many.

Bad input is refused before anything is sent: a duplicate id (naming both
rows), no ids.  An intersection with fewer than ``min_rows`` rows (what a
training batch needs) is a :class:`~vfl.errors.DataError` at every party,
raised as soon as the row counts show it cannot be met and again after
matching.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Callable, Sequence

import numpy as np

from vfl.crypto import group
from vfl.errors import DataError, ProtocolError
from vfl.transport import Endpoint

VERSION = "vfl-psi-2"
#: Ids per message of points or digests (a 1 MiB frame of points).
CHUNK_IDS = 1 << 15
#: Bytes of each party's salt share.
SALT_BYTES = 32
#: Bytes of a matching digest (collisions among 10^6 x 10^6 pairs: about 2^-88).
DIGEST_BYTES = 16
_DIGEST = np.dtype(f"V{DIGEST_BYTES}")
_HASH_TAG = b"vfl-psi-2/id"
_SALT_TAG = b"vfl-psi-2/salt"
_MATCH_TAG = b"vfl-psi-2/match"

OnProgress = Callable[[int, int], None]


# -- shared steps ----------------------------------------------------------------------------
#: What each message of the intersection carries, by sender (the hub is the label party, each spoke a feature
#: party), as :mod:`vfl.protocols.messages` says.
MESSAGES = {
    ("feature", "psi_hello"): "the protocol's version, its share of the salt and its row count",
    ("label", "psi_setup"): "every party's salt share and row count (or why the run stops: too few rows)",
    ("feature", "psi_spoke_points"): "its ids as b·H(id), shuffled: blinded by a scalar b only it knows",
    ("label", "psi_hub_points"): "its ids as a·H(id): blinded by a scalar a only it knows",
    ("feature", "psi_hub_digests"): "hashes of b·(a·H(id)) of the hub's ids, in the hub's order",
    ("label", "psi_result"): "the size of the intersection and which of the spoke's rows are in it, in the common "
                             "order",
}


def check_unique(ids: Sequence[bytes], party: str) -> None:
    """Refuse a list with the same id twice, naming both rows (0-based positions)."""
    if len(set(ids)) == len(ids):
        return
    seen: dict[bytes, int] = {}
    for row, value in enumerate(ids):
        first = seen.setdefault(value, row)
        if first != row:
            raise DataError(f"party {party}: id {_show(value)} appears twice (rows {first} and {row}); "
                            "ids must be unique for the intersection")


def _show(value: bytes) -> str:
    text = bytes(value).decode("utf-8", "replace")
    return repr(text if len(text) <= 40 else text[:37] + "...")


def check_ids(ids: Sequence[bytes], party: str) -> list[bytes]:
    """The ids as bytes; refuses no ids and a repeated id, naming the party."""
    ids = list(map(bytes, ids))
    if not ids:
        raise DataError(f"party {party}: no ids to intersect")
    check_unique(ids, party)
    return ids


def _shuffle(n: int) -> np.ndarray:
    """A uniformly random permutation of ``range(n)`` from the OS CSPRNG (sorting distinct 64-bit random keys)."""
    while True:
        keys = np.frombuffer(os.urandom(8 * n), dtype=np.uint64)
        order = np.argsort(keys, kind="stable")
        ranked = keys[order]
        if n < 2 or np.all(ranked[1:] != ranked[:-1]):  # a tie (about n^2 / 2^65) would bias: draw again
            return order


def _combine_salt(shares: Sequence[bytes]) -> bytes:
    return hashlib.sha256(_SALT_TAG + b"".join(sorted(shares))).digest()


def too_small(sizes: dict[str, int], min_rows: int, intersection: int | None = None) -> str | None:
    """The reason the intersection cannot serve (or ``None``)."""
    need = max(1, int(min_rows))
    parties = ", ".join(f"{p}: {n}" for p, n in sizes.items())
    if intersection is None:
        if min(sizes.values()) < need:
            return (f"the parties hold too few rows for an intersection of at least {need} rows "
                    f"(a training batch needs that many; rows per party: {parties})")
        return None
    if intersection < need:
        what = "is empty" if intersection == 0 else f"has {intersection} rows, fewer than the {need} needed"
        return (f"the private set intersection {what} (a training batch needs at least {need}; rows per "
                f"party: {parties}); check that the parties use the same id column and id format")
    return None


def _send_chunks(ep: Endpoint, peers: Sequence[str], name: str, chunks) -> None:
    """Send each ``(start, payload)`` chunk to every peer as message ``name``."""
    for start, payload in chunks:
        for peer in peers:
            ep.send(peer, name, "masked", start=start, data=payload)


def recv_chunks(ep: Endpoint, peer: str, name: str, total: int, width: int):
    """Yield ``(start, payload)`` of the ``total`` items of ``width`` bytes that ``peer`` sends as ``name``."""
    done = 0
    while done < total:
        message = ep.recv(peer, name)
        start, data = message.fields.get("start"), message.fields.get("data")
        if not isinstance(data, bytes) or start != done or len(data) % width or not data \
                or done + len(data) // width > total:
            raise ProtocolError(f"{ep.role}: {peer} sent a malformed {name!r} chunk (items {start}.. of "
                                f"{total}, {len(data) if isinstance(data, bytes) else '?'} bytes)")
        yield start, data
        done += len(data) // width


def recv_all(ep: Endpoint, peer: str, name: str, total: int, width: int) -> bytes:
    """The ``total`` items of ``width`` bytes that ``peer`` sends as ``name`` (:func:`recv_chunks`), joined."""
    joined = bytearray()
    for _, data in recv_chunks(ep, peer, name, total, width):
        joined += data
    return bytes(joined)


def _own_chunks(ids: Sequence[bytes], order: np.ndarray, domain: bytes, scalar: bytes, progress: "Progress"):
    """Yield ``(start, scalar·H(id) for the ids in the shuffled order from start)``, :data:`CHUNK_IDS` at a time.

    The ids are hashed to their seeds once, in row order; the shuffle then moves 32-byte seeds in one numpy
    gather rather than ids in a Python loop."""
    seeds = np.frombuffer(group.seeds(ids, domain), dtype=f"V{group.SEED_BYTES}")
    for lo in range(0, len(ids), CHUNK_IDS):
        yield lo, group.map_and_blind(seeds[order[lo:lo + CHUNK_IDS]].tobytes(), scalar)
        progress.add(min(CHUNK_IDS, len(ids) - lo))


def _blind_from(ep: Endpoint, peer: str, name: str, points: bytes, scalar: bytes, salt: bytes, start: int) -> bytes:
    """The matching digests of ``scalar`` times the peer's points: truncated SHA-256, keyed with the run's salt."""
    try:
        return group.blind_digests(points, scalar, _MATCH_TAG + salt, DIGEST_BYTES)
    except group.InvalidPointError as exc:
        raise ProtocolError(f"{ep.role}: {peer} sent an invalid point (item {start + exc.index} of "
                            f"{name!r}): not the u-coordinate of a point of large order on Curve25519 (not "
                            "canonical, on the twist, or of small order); stopping") from None


class Progress:
    def __init__(self, callback: OnProgress | None, total: int):
        self.callback, self.total, self.done = callback, total, 0

    def add(self, n: int) -> None:
        self.done += n
        if self.callback:
            self.callback(self.done, self.total)


# -- the hub (label party) --------------------------------------------------------------------
def run_hub(ep: Endpoint, ids: Sequence[bytes], spokes: Sequence[str], min_rows: int = 1,
            on_progress: OnProgress | None = None, sizes_out: dict | None = None) -> np.ndarray:
    """The hub's program.

    Parameters
    ----------
    ep : Endpoint
    ids : sequence of bytes
        The hub's canonical ids, one per row.
    spokes : sequence of str
        The spokes' roles; the first one's double-blinded points set the common order.
    min_rows : int
        Fewest rows the intersection may have.
    on_progress : callable, optional
        ``on_progress(done, total)`` as points are hashed, blinded and matched.
    sizes_out : dict, optional
        Receives every party's row count.

    Returns
    -------
    numpy.ndarray
        The hub's rows (positions in ``ids``) in the intersection, in the common order.
    """
    spokes = list(spokes)
    if not spokes or len(set(spokes)) != len(spokes) or ep.role in spokes:
        raise ValueError("the hub needs one or more distinct spokes other than itself")
    ids = check_ids(ids, ep.role)
    scalar = group.random_scalar()

    # Step 1: salt shares and row counts
    sizes, shares = hub_hellos(ep, spokes, len(ids), "psi", VERSION, sizes_out)
    hub_setup(ep, spokes, "psi", sizes, shares, too_small(sizes, min_rows))
    salt = _combine_salt(shares)
    domain = _HASH_TAG + salt
    progress = Progress(on_progress, len(ids) + sum(sizes[s] for s in spokes))

    # Step 2: a·H(x), shuffled, to every spoke
    order = _shuffle(len(ids))
    _send_chunks(ep, spokes, "psi_hub_points", _own_chunks(ids, order, domain, scalar, progress))

    # Step 3: a·(b_j·H(y)) per spoke, and the spoke's b_j·(a·H(x)), both hashed
    matched_rows, first_keys = None, None
    pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for spoke in spokes:
        theirs = bytearray()
        for start, points in recv_chunks(ep, spoke, "psi_spoke_points", sizes[spoke], group.POINT_BYTES):
            theirs += _blind_from(ep, spoke, "psi_spoke_points", points, scalar, salt, start)
            progress.add(len(points) // group.POINT_BYTES)
        mine_d = np.frombuffer(recv_all(ep, spoke, "psi_hub_digests", len(ids), DIGEST_BYTES), _DIGEST)
        # Step 4: match (positions in the hub's shuffled list, in the spoke's shuffled list)
        theirs_d = np.frombuffer(bytes(theirs), _DIGEST)
        del theirs
        hub_pos, spoke_pos = _match(ep, spoke, mine_d, theirs_d)
        pairs[spoke] = (hub_pos, spoke_pos)
        matched_rows = (hub_pos if matched_rows is None
                        else np.intersect1d(matched_rows, hub_pos, assume_unique=True))
        if first_keys is None:
            first_keys = mine_d
        del theirs_d

    common = matched_rows[_digest_order(first_keys[matched_rows])]
    refusal = too_small(sizes, min_rows, len(common))
    for spoke in spokes:
        hub_pos, spoke_pos = pairs[spoke]
        at = np.searchsorted(hub_pos, common)   # hub_pos is sorted, and holds every row of common
        ep.send(spoke, "psi_result", "masked", refusal=refusal or "", size=len(common),
                positions=np.zeros(0, np.int64) if refusal else spoke_pos[at].astype(np.int64))
    if refusal:
        raise DataError(f"{ep.role}: {refusal}")
    return order[common].astype(np.int64)


# -- a spoke (feature party) ------------------------------------------------------------------
def run_spoke(ep: Endpoint, ids: Sequence[bytes], hub: str, min_rows: int = 1,
              on_progress: OnProgress | None = None, sizes_out: dict | None = None) -> np.ndarray:
    """A spoke's program: the parameters of :func:`run_hub` (the spoke's own ids), ``hub`` (the hub's role) in
    place of ``spokes``; ``on_progress(done, total)`` as points are hashed and blinded.

    Returns
    -------
    numpy.ndarray
        The spoke's rows (positions in ``ids``) in the intersection, in the common order.
    """
    ids = check_ids(ids, ep.role)
    scalar = group.random_scalar()

    # Step 1: salt shares and row counts
    sizes, shares, _ = spoke_hello(ep, hub, len(ids), "psi", VERSION, min_rows, sizes_out)
    salt = _combine_salt(shares)
    n_hub = sizes[hub]
    progress = Progress(on_progress, len(ids) + n_hub)

    # Step 2: b·H(y), shuffled, to the hub
    order = _shuffle(len(ids))
    _send_chunks(ep, [hub], "psi_spoke_points", _own_chunks(ids, order, _HASH_TAG + salt, scalar, progress))

    # Step 3: b·(a·H(x)), hashed, back to the hub in its order
    for start, points in recv_chunks(ep, hub, "psi_hub_points", n_hub, group.POINT_BYTES):
        digests = _blind_from(ep, hub, "psi_hub_points", points, scalar, salt, start)
        ep.send(hub, "psi_hub_digests", "masked", start=start, data=digests)
        progress.add(len(points) // group.POINT_BYTES)

    # Step 4: my rows of the intersection, in the common order
    result = ep.recv(hub, "psi_result")
    positions = final_positions(ep, hub, result, len(ids), sizes, min_rows, "psi_result")
    return order[positions]


def final_positions(ep: Endpoint, hub: str, result, n: int, sizes: dict[str, int], min_rows: int,
                    message: str) -> np.ndarray:
    """A spoke's check of the hub's result: distinct positions below ``n``, as many as ``size``, enough of them."""
    if result["refusal"]:
        raise DataError(f"{ep.role}: {result['refusal']}")
    positions = result["positions"]
    if not isinstance(positions, np.ndarray) or positions.ndim != 1 or len(positions) != result["size"] \
            or (len(positions) and (positions.min() < 0 or positions.max() >= n)) \
            or not distinct(positions, n):
        raise ProtocolError(f"{ep.role}: {hub} sent a malformed {message!r}")
    refusal = too_small(sizes, min_rows, len(positions))
    if refusal:
        raise DataError(f"{ep.role}: {refusal}")
    return positions.astype(np.int64)


def distinct(positions: np.ndarray, n: int) -> bool:
    """Whether ``positions`` (all in ``[0, n)``) has no repeat."""
    seen = np.zeros(n, bool)
    seen[positions] = True
    return int(np.count_nonzero(seen)) == len(positions)


def _check_distinct(ep: Endpoint, spoke: str, *digest_lists: np.ndarray) -> None:
    """Distinct ids give distinct digests (up to a 2^-88 chance); repeats mean a spoke broke the protocol."""
    for digests in digest_lists:
        ranked = np.sort(digests)
        if len(ranked) > 1 and np.any(ranked[1:] == ranked[:-1]):
            raise ProtocolError(f"{ep.role}: {spoke} sent repeated points or digests (duplicate ids at {spoke}, "
                                "or a fault); stopping")


def _leading(digests: np.ndarray) -> np.ndarray:
    """The first 8 bytes of each digest as a big-endian integer: sorting these sorts the digests bytewise (as
    numpy sorts them) wherever no two share their first 8 bytes."""
    return digests.view(np.uint8).reshape(-1, DIGEST_BYTES)[:, :8].copy().view(">u8").reshape(-1).astype(np.uint64)


def _no_ties(ranked: np.ndarray) -> bool:
    return len(ranked) < 2 or not np.any(ranked[1:] == ranked[:-1])


def _digest_order(digests: np.ndarray) -> np.ndarray:
    """``np.argsort(digests, kind="stable")`` for 16-byte digests, sorting 64-bit integers (several times faster);
    the bytewise sort where two share their first 8 bytes (a 2^-64 chance a pair)."""
    lead = _leading(digests)
    order = np.argsort(lead, kind="stable")
    return order if _no_ties(lead[order]) else np.argsort(digests, kind="stable")


def _match(ep: Endpoint, spoke: str, mine: np.ndarray, theirs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions in ``mine`` and in ``theirs`` of the digests both hold, in the order of ``mine``.

    A repeated digest within either list is a :class:`ProtocolError` naming the spoke.  Works on the digests'
    first 8 bytes as integers, confirming every match on all 16 bytes; if two digests of one list share their
    first 8 bytes (a 2^-64 chance a pair) it falls back to sorting the whole digests.
    """
    lead_mine, lead_theirs = _leading(mine), _leading(theirs)
    by_mine = np.argsort(lead_mine)
    ranked_mine, ranked_theirs = lead_mine[by_mine], np.sort(lead_theirs)
    if not (_no_ties(ranked_mine) and _no_ties(ranked_theirs)):
        _check_distinct(ep, spoke, mine, theirs)
        _, hub_pos, spoke_pos = np.intersect1d(mine, theirs, assume_unique=True, return_indices=True)
        by_hub = np.argsort(hub_pos)
        return hub_pos[by_hub], spoke_pos[by_hub]
    at = np.minimum(np.searchsorted(ranked_mine, lead_theirs), max(len(mine) - 1, 0))
    found = ranked_mine[at] == lead_theirs if len(mine) else np.zeros(len(theirs), bool)
    spoke_pos = np.nonzero(found)[0]
    hub_pos = by_mine[at[spoke_pos]]
    words_mine, words_theirs = mine.view(np.uint64).reshape(-1, 2), theirs.view(np.uint64).reshape(-1, 2)
    same = (words_mine[hub_pos] == words_theirs[spoke_pos]).all(axis=1)      # the whole 16 bytes
    hub_pos, spoke_pos = hub_pos[same], spoke_pos[same]
    by_hub = np.argsort(hub_pos)
    return hub_pos[by_hub], spoke_pos[by_hub]


def hub_hellos(ep: Endpoint, spokes: Sequence[str], n_rows: int, prefix: str, version: str,
               sizes_out: dict | None = None) -> tuple[dict[str, int], list[bytes]]:
    """Step 1 of every PSI protocol at the hub: each spoke's ``PREFIX_hello`` (its protocol version, salt share
    and row count), checked.  Returns every party's row count and the salt shares, the hub's own (fresh) first."""
    sizes, shares = {ep.role: n_rows}, [os.urandom(SALT_BYTES)]
    for spoke in spokes:
        hello = ep.recv(spoke, f"{prefix}_hello")
        if hello["version"] != version:
            raise ProtocolError(f"{ep.role}: {spoke} runs PSI protocol {hello['version']!r}, not {version!r}")
        if not isinstance(hello["salt_share"], bytes) or len(hello["salt_share"]) != SALT_BYTES \
                or type(hello["rows"]) is not int or hello["rows"] < 0:
            raise ProtocolError(f"{ep.role}: {spoke} sent a malformed '{prefix}_hello'")
        sizes[spoke] = hello["rows"]
        shares.append(hello["salt_share"])
    if sizes_out is not None:
        sizes_out.update(sizes)
    return sizes, shares


def hub_setup(ep: Endpoint, spokes: Sequence[str], prefix: str, sizes: dict[str, int], shares: Sequence[bytes],
              refusal: str | None, extra=None) -> None:
    """Send every spoke the ``PREFIX_setup``: every salt share and row count, or why the run stops (then raise it
    here too); ``extra(spoke)``: a protocol's own fields for that spoke."""
    for spoke in spokes:
        ep.send(spoke, f"{prefix}_setup", "public", salt_shares=b"".join(shares), sizes=json.dumps(sizes),
                refusal=refusal or "", **(extra(spoke) if extra is not None else {}))
    if refusal:
        raise DataError(f"{ep.role}: {refusal}")


def spoke_hello(ep: Endpoint, hub: str, n_rows: int, prefix: str, version: str, min_rows: int,
                sizes_out: dict | None = None) -> tuple[dict[str, int], list[bytes], object]:
    """Step 1 of every PSI protocol at a spoke: its ``PREFIX_hello`` (a fresh salt share), then the hub's
    ``PREFIX_setup`` checked (its own share and row count among them).  Returns every party's row count, the salt
    shares and the setup message (a protocol's own fields); a refusal (too few rows) raises :class:`DataError`."""
    share = os.urandom(SALT_BYTES)
    ep.send(hub, f"{prefix}_hello", "public", version=version, salt_share=share, rows=n_rows)
    setup = ep.recv(hub, f"{prefix}_setup")
    shares, sizes = setup["salt_shares"], parse_sizes(ep, hub, setup["sizes"], f"{prefix}_setup")
    if not isinstance(shares, bytes) or len(shares) % SALT_BYTES or sizes.get(ep.role) != n_rows \
            or hub not in sizes or len(shares) != SALT_BYTES * len(sizes):
        raise ProtocolError(f"{ep.role}: {hub} sent a malformed '{prefix}_setup'")
    shares = [shares[i:i + SALT_BYTES] for i in range(0, len(shares), SALT_BYTES)]
    if share not in shares:
        raise ProtocolError(f"{ep.role}: {hub} left {ep.role}'s salt share out of the combined salt")
    spoke_accepts(ep, sizes, setup["refusal"], min_rows, sizes_out)
    return sizes, shares, setup


def spoke_accepts(ep: Endpoint, sizes: dict[str, int], refusal: str, min_rows: int, sizes_out: dict | None) -> None:
    """A spoke's last step of every protocol's setup: every party's row count into ``sizes_out``; the hub's
    ``refusal``, or too few rows for ``min_rows``, raised as a :class:`DataError` naming this party."""
    if sizes_out is not None:
        sizes_out.update(sizes)
    refusal = refusal or too_small(sizes, min_rows)
    if refusal:
        raise DataError(f"{ep.role}: {refusal}")


def parse_sizes(ep: Endpoint, hub: str, text, message: str = "psi_setup") -> dict[str, int]:
    """The row counts a hub sent (JSON ``{party: rows}``); a :class:`ProtocolError` naming the hub if malformed."""
    try:
        sizes = json.loads(text)
        if not isinstance(sizes, dict) or not all(isinstance(k, str) and type(v) is int and v >= 0
                                                  for k, v in sizes.items()):
            raise ValueError
    except (TypeError, ValueError, RecursionError):
        raise ProtocolError(f"{ep.role}: {hub} sent malformed row counts in {message!r}") from None
    return sizes


# -- either role ------------------------------------------------------------------------------
def align_rows(ep: Endpoint, ids: Sequence[bytes], hub: str, spokes: Sequence[str], min_rows: int = 1,
               on_progress: OnProgress | None = None, sizes_out: dict | None = None) -> np.ndarray:
    """Run this endpoint's role of the PSI (hub if ``ep.role == hub``, else a spoke).

    ``sizes_out``, if given, receives every party's row count (each party learns them).

    Returns
    -------
    numpy.ndarray
        This party's rows (positions in ``ids``) in the intersection, in the order common to all parties.
    """
    return by_role(ep, hub, spokes, lambda: run_hub(ep, ids, spokes, min_rows, on_progress, sizes_out),
                   lambda: run_spoke(ep, ids, hub, min_rows, on_progress, sizes_out))


def by_role(ep: Endpoint, hub: str, spokes: Sequence[str], as_hub: Callable[[], np.ndarray],
            as_spoke: Callable[[], np.ndarray]) -> np.ndarray:
    """Every PSI protocol's ``align_rows``: ``as_hub()`` if ``ep.role`` is the hub, ``as_spoke()`` if it is one of
    the spokes; a :class:`ValueError` naming the role otherwise."""
    if ep.role == hub:
        return as_hub()
    if ep.role not in spokes:
        raise ValueError(f"role {ep.role!r} is neither the hub {hub!r} nor one of the spokes {list(spokes)}")
    return as_spoke()
