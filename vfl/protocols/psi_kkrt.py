"""Entity alignment by KKRT's OPRF-based private set intersection: one hub, K >= 1 spokes, pairwise.

The same contract as :mod:`vfl.protocols.psi` (each party ends with its rows of the intersection, in one
common order; bad input refused before anything is sent), with Kolesnikov, Kumaresan, Rosulek and
Trieu's batched oblivious PRF (CCS 2016) instead of Diffie–Hellman: symmetric crypto per id, base OTs
only once per pair.  The hub (label party) is the OPRF *receiver* with every spoke (feature party), the
spoke the *sender*.  ``n`` is the hub's row count, ``m`` its cuckoo table's bins
(:mod:`vfl.crypto.cuckoo`), ``w = 512`` the code's width (:mod:`vfl.crypto.kkrt`)::

    Step  Hub                                            Spoke j
    1     -                                              salt share, row count -> hub (kkrt_hello)
          salt shares, row counts, the base-OT point A_j -> spoke j (kkrt_setup)
          hashes its ids into the cuckoo table (3 hash functions, no stash)
    2                                                    w base-OT points B_i, choosing the bits of its
                                                         secret s -> hub (kkrt_base_points)
    3     per chunk of bins: the OT-extension columns    q_j = t_j xor (C(r_j) and s) for each bin j;
          u_i = G(k_i^0) xor G(k_i^1) xor c_i -> spoke   for its ids x and i = 0, 1, 2:
          (kkrt_columns, w m / 8 bytes in all); its own  H(q_{h_i(x)} xor (C(x || i) and s))
          outputs H(t_j) for its ids
    4                                                    its three lists of outputs (one per hash
                                                         function), each sorted -> hub (kkrt_values)
    5     matches its outputs against the list of the function that placed each id; keeps the rows
          every spoke matched, ordered by its outputs with the first spoke; tells each spoke the
          positions of its matches in its lists -> spoke j (kkrt_result)
                                                         maps the positions back to its own rows

What each party learns (semi-honest parties, hub and spokes not colluding): every party, the row counts
of all parties and the size of the final intersection; a spoke, which of its rows are in the final
intersection (its view otherwise is the base OT and the columns ``u_i``, pseudorandom); the hub, for
each spoke, which of its own rows are in the pairwise intersection with that spoke (more than the final
intersection when K >= 2), and nothing of a spoke's other ids (their outputs are pseudorandom to it).
See docs/psi.md.
"""

from __future__ import annotations

import hashlib
from typing import Sequence

import numpy as np

from vfl.crypto import cuckoo, kkrt, ot
from vfl.errors import DataError, ProtocolError
from vfl.protocols.psi import (OnProgress, Progress, by_role, check_ids, distinct, final_positions, hub_hellos,
                               hub_setup, recv_chunks, spoke_hello, too_small)
from vfl.transport import Endpoint

VERSION = "vfl-psi-kkrt-1"
#: Bins per message of OT-extension columns (a 4 MiB message).
CHUNK_BINS = 1 << 16
#: OPRF outputs per message of a spoke's lists.
CHUNK_VALUES = 1 << 18
_SALT_TAG = b"vfl-psi-kkrt-1/salt"

#: What each message carries, by sender role (the narration and the board read it: :mod:`vfl.deploy.narration`).
MESSAGES = {
    ("feature", "kkrt_hello"): "the protocol's version, its share of the salt and its row count",
    ("label", "kkrt_setup"): "every party's salt share and row count, and its base-OT point A (or why the run "
                             "stops: too few rows)",
    ("feature", "kkrt_base_points"): "its 512 base-OT points B_i, each choosing one bit of its secret s (the hub "
                                     "learns none of them)",
    ("label", "kkrt_columns"): "a chunk of the OT extension's columns u_i = G(k_i^0) xor G(k_i^1) xor c_i: its "
                               "ids' code words in its cuckoo table, masked by pseudorandom streams",
    ("feature", "kkrt_values"): "its ids' oblivious-PRF outputs, one sorted list per hash function: pseudorandom "
                                "to the hub except where its own ids match",
    ("label", "kkrt_result"): "the size of the intersection and which positions of the spoke's lists matched, in "
                              "the common order",
}


def _salt(shares: Sequence[bytes]) -> bytes:
    return hashlib.sha256(_SALT_TAG + b"".join(sorted(shares))).digest()


def _table(ids: list[bytes], salt: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The hub's cuckoo table: its ids' keys, the table (item per bin or -1), and each item's hash function."""
    m = cuckoo.table_size(len(ids))
    keys, bins = kkrt.digest_ids(ids, salt, m)
    return (keys, *cuckoo.place(bins, m))


def _sorted_order(values: np.ndarray) -> np.ndarray:
    """The order that sorts values (rows of bytes) as byte strings."""
    hi = kkrt.first_word(values)
    order = np.argsort(hi)
    ranked = hi[order]
    if len(ranked) > 1 and np.any(ranked[1:] == ranked[:-1]):     # a tie in the first 8 bytes: rare
        hi, lo = kkrt.sort_keys(values)
        order = np.lexsort((lo, hi))
    return order


# -- the hub (label party): OPRF receiver with every spoke --------------------------------------
def run_hub(ep: Endpoint, ids: Sequence[bytes], spokes: Sequence[str], min_rows: int = 1,
            on_progress: OnProgress | None = None, sizes_out: dict | None = None) -> np.ndarray:
    """The hub's program: the parameters and the result of the DH protocol's :func:`vfl.protocols.psi.run_hub`.

    The hub's OPRF outputs with the first spoke set the common order; ``on_progress(done, total)`` counts the
    bins sent and the outputs matched.
    """
    spokes = list(spokes)
    if not spokes or len(set(spokes)) != len(spokes) or ep.role in spokes:
        raise ValueError("the hub needs one or more distinct spokes other than itself")
    ids = check_ids(ids, ep.role)

    # Step 1: salt shares and row counts; the cuckoo table; the base-OT points A_j
    sizes, shares = hub_hellos(ep, spokes, len(ids), "kkrt", VERSION, sizes_out)
    salt = _salt(shares)
    refusal = too_small(sizes, min_rows)
    if refusal is None:
        try:
            keys, table, chosen = _table(ids, salt)
        except cuckoo.CuckooFailure as exc:
            refusal = f"{exc}: run the alignment again"
    senders = {spoke: ot.sender_start() for spoke in spokes}
    hub_setup(ep, spokes, "kkrt", sizes, shares, refusal, lambda spoke: {"ot_point": senders[spoke][1]})
    m, code = len(table), kkrt.code_key(salt)
    progress = Progress(on_progress, sum(m + 3 * sizes[s] for s in spokes))

    matched, first = None, None
    pairs: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for spoke in spokes:
        # Step 2: the base OTs (the hub sends; the spoke chooses the bits of its secret s)
        a, big_a = senders[spoke]
        try:
            seeds0, seeds1 = ot.sender_seeds(a, big_a, ep.recv(spoke, "kkrt_base_points")["points"],
                                             kkrt.CODE_BITS)
        except ProtocolError as exc:
            raise ProtocolError(f"{ep.role}: {spoke} sent a bad 'kkrt_base_points': {exc}; stopping") from None
        # Step 3: the extension's columns, chunk by chunk, and the hub's own outputs H(t_j)
        size = kkrt.output_bytes(len(ids), sizes[spoke])
        mine = _send_columns(ep, spoke, keys, table, chosen, code, ot.Streams(seeds0), ot.Streams(seeds1),
                             size, progress)
        # Steps 4-5: the spoke's three sorted lists; match
        theirs = np.empty((3 * sizes[spoke], size), np.uint8)
        for start, data in recv_chunks(ep, spoke, "kkrt_values", 3 * sizes[spoke], size):
            theirs[start:start + len(data) // size] = np.frombuffer(data, np.uint8).reshape(-1, size)
            progress.add(len(data) // size)
        rows, positions = _match(ep, spoke, mine, chosen, theirs.reshape(3, sizes[spoke], size))
        del theirs
        pairs[spoke] = (rows, positions)
        matched = rows if matched is None else np.intersect1d(matched, rows, assume_unique=True)
        if first is None:
            first = mine

    common = matched[_sorted_order(kkrt.take_rows(first, matched))]
    refusal = too_small(sizes, min_rows, len(common))
    for spoke in spokes:
        rows, positions = pairs[spoke]
        at = np.searchsorted(rows, common)          # rows is sorted and holds every row of common
        ep.send(spoke, "kkrt_result", "masked", refusal=refusal or "", size=len(common),
                positions=np.zeros(0, np.int64) if refusal else positions[at].astype(np.int64))
    if refusal:
        raise DataError(f"{ep.role}: {refusal}")
    return common.astype(np.int64)


def _send_columns(ep, spoke, keys, table, chosen, code, streams0, streams1, size, progress) -> np.ndarray:
    """Send ``u_i = G(k_i^0) xor G(k_i^1) xor c_i`` chunk by chunk; return the hub's outputs ``H(t_j)`` by row."""
    mine = np.zeros((len(keys), size), np.uint8)
    for lo in range(0, len(table), CHUNK_BINS):
        occupants = table[lo:lo + CHUNK_BINS]
        nb = len(occupants)
        full = occupants >= 0
        items = occupants[full]
        rows = np.zeros((nb, kkrt.CODE_BYTES), np.uint8)         # an empty bin's code word: all zero
        kkrt.put_rows(rows, np.flatnonzero(full), kkrt.code_rows(code, kkrt.take_rows(keys, items), chosen[items]))
        t = streams0.next(nb // 8)
        u = t ^ streams1.next(nb // 8)
        u ^= ot.transpose(rows)
        ep.send(spoke, "kkrt_columns", "masked", start=lo, data=u.tobytes())
        kkrt.put_rows(mine, items, kkrt.outputs(kkrt.take_rows(ot.transpose(t), np.flatnonzero(full)), size))
        progress.add(nb)
    return mine


def _match(ep, spoke, mine, chosen, theirs) -> tuple[np.ndarray, np.ndarray]:
    """The hub's rows whose output is in the list of the function that placed them, and where (sorted by row)."""
    n_spoke = theirs.shape[1]
    rows, positions = [], []
    for f in range(cuckoo.HASHES):
        hi_s, lo_s = kkrt.sort_keys(theirs[f])
        if n_spoke > 1 and not np.all((hi_s[1:] > hi_s[:-1]) | ((hi_s[1:] == hi_s[:-1]) & (lo_s[1:] > lo_s[:-1]))):
            raise ProtocolError(f"{ep.role}: {spoke} sent a list of outputs out of order or with repeats "
                                "(duplicate ids at the spoke, or a fault); stopping")
        items = np.flatnonzero(chosen == f)
        hi_r, lo_r = kkrt.sort_keys(kkrt.take_rows(mine, items))
        ranked = np.argsort(hi_r)                   # sorted needles: a faster search
        items, hi_r, lo_r = items[ranked], hi_r[ranked], lo_r[ranked]
        at = np.searchsorted(hi_s, hi_r)
        found = np.zeros(len(items), bool)
        where = np.zeros(len(items), np.int64)
        probe = at.copy()
        live = probe < n_spoke
        while live.any():                           # more than one round only on a tie in the first 8 bytes
            k = np.minimum(probe, n_spoke - 1)
            live &= hi_s[k] == hi_r
            hit = live & (lo_s[k] == lo_r)
            found |= hit
            where[hit] = k[hit]
            live &= ~hit
            probe += 1
            live &= probe < n_spoke
        rows.append(items[found])
        positions.append(f * n_spoke + where[found])
    rows, positions = np.concatenate(rows), np.concatenate(positions)
    by_row = np.argsort(rows)
    return rows[by_row], positions[by_row]


# -- a spoke (feature party): OPRF sender -----------------------------------------------------
def run_spoke(ep: Endpoint, ids: Sequence[bytes], hub: str, min_rows: int = 1,
              on_progress: OnProgress | None = None, sizes_out: dict | None = None) -> np.ndarray:
    """A spoke's program: the parameters and the result of the DH protocol's :func:`vfl.protocols.psi.run_spoke`.

    ``on_progress(done, total)`` counts the columns received and the outputs sent.
    """
    ids = check_ids(ids, ep.role)
    n = len(ids)

    # Step 1: salt shares and row counts
    sizes, shares, setup = spoke_hello(ep, hub, n, "kkrt", VERSION, min_rows, sizes_out)

    # Step 2: the base OTs, choosing the bits of s
    choices = ot.random_bits(kkrt.CODE_BITS)
    try:
        points, seeds = ot.receiver_choose(setup["ot_point"], choices)
    except ProtocolError as exc:
        raise ProtocolError(f"{ep.role}: {hub} sent a bad 'kkrt_setup': {exc}; stopping") from None
    ep.send(hub, "kkrt_base_points", "public", points=points)

    # Step 3: q_j per chunk of bins, and this spoke's outputs for each id and hash function
    salt, n_hub = _salt(shares), sizes[hub]
    m, size, code = cuckoo.table_size(n_hub), kkrt.output_bytes(n_hub, n), kkrt.code_key(salt)
    keys, bins = kkrt.digest_ids(ids, salt, m)
    progress = Progress(on_progress, m + 3 * n)
    values = _evaluate(ep, hub, keys, bins, m, code, choices, ot.Streams(seeds), size, progress)

    # Step 4: the three lists, each sorted (an order that depends only on the pseudorandom outputs)
    orders = np.stack([_sorted_order(values[f]) for f in range(cuckoo.HASHES)])
    sorted_values = kkrt.take_rows(values.reshape(-1, size), (orders + n * np.arange(cuckoo.HASHES)[:, None]).ravel())
    sorted_values = sorted_values.reshape(-1)
    width = CHUNK_VALUES * size
    for lo in range(0, len(sorted_values), width):
        ep.send(hub, "kkrt_values", "masked", start=lo // size, data=sorted_values[lo:lo + width].tobytes())
        progress.add(min(width, len(sorted_values) - lo) // size)

    # Step 5: my rows of the intersection, in the common order
    result = ep.recv(hub, "kkrt_result")
    positions = final_positions(ep, hub, result, 3 * n, sizes, min_rows, "kkrt_result")
    rows = orders.reshape(-1)[positions]
    if not distinct(rows, n):
        raise ProtocolError(f"{ep.role}: {hub} sent a malformed 'kkrt_result' (one row matched twice)")
    return rows.astype(np.int64)


def _evaluate(ep, hub, keys, bins, m, code, choices, streams, size, progress) -> np.ndarray:
    """Receive the columns chunk by chunk; the outputs ``H(q_j xor (C(x || i) and s))``, ``(3, n, size)``."""
    n = len(keys)
    flat = bins.T.reshape(-1)                       # entry e: hash function e // n of item e % n
    chunks = -(-m // CHUNK_BINS)
    chunk_of = (flat // CHUNK_BINS).astype(np.uint16 if chunks <= 1 << 16 else np.uint32)
    by_chunk = np.argsort(chunk_of, kind="stable")      # a radix sort on 16-bit keys
    bounds = np.searchsorted(chunk_of[by_chunk], np.arange(chunks + 1))
    del chunk_of
    secret_row = np.packbits(choices, bitorder="little")            # s as one 64-byte row
    secret_cols = (choices.astype(np.uint8) * np.uint8(0xFF))[:, None]  # s_i as a byte mask per column
    values = np.empty((3 * n, size), np.uint8)
    for c, (start, data) in enumerate(recv_chunks(ep, hub, "kkrt_columns", m, kkrt.CODE_BYTES)):
        nb = len(data) // kkrt.CODE_BYTES
        if start != c * CHUNK_BINS or nb != min(CHUNK_BINS, m - start):
            raise ProtocolError(f"{ep.role}: {hub} sent a 'kkrt_columns' chunk of {nb} bins at bin {start}, "
                                f"not {min(CHUNK_BINS, m - c * CHUNK_BINS)} at {c * CHUNK_BINS}")
        u = np.frombuffer(data, np.uint8).reshape(kkrt.CODE_BITS, nb // 8)
        q = streams.next(nb // 8) ^ (u & secret_cols)
        q_rows = ot.transpose(q)
        entries = by_chunk[bounds[c]:bounds[c + 1]]
        function, item = np.divmod(entries, n)
        rows = kkrt.code_rows(code, kkrt.take_rows(keys, item), function.astype(np.uint8)) & secret_row
        rows ^= kkrt.take_rows(q_rows, flat[entries] - start)
        kkrt.put_rows(values, entries, kkrt.outputs(rows, size))
        progress.add(nb)
    return values.reshape(3, n, size)


# -- either role ------------------------------------------------------------------------------
def align_rows(ep: Endpoint, ids: Sequence[bytes], hub: str, spokes: Sequence[str], min_rows: int = 1,
               on_progress: OnProgress | None = None, sizes_out: dict | None = None) -> np.ndarray:
    """Run this endpoint's role of the KKRT PSI: the parameters and the result of the DH protocol's
    :func:`vfl.protocols.psi.align_rows`."""
    return by_role(ep, hub, spokes, lambda: run_hub(ep, ids, spokes, min_rows, on_progress, sizes_out),
                   lambda: run_spoke(ep, ids, hub, min_rows, on_progress, sizes_out))
