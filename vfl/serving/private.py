"""Private queries: the label party scores an id without any feature party learning which id.

By id (:mod:`vfl.serving.rounds`), every request hands each feature party the ids
asked: a telco learns that its customer has just applied for a loan at the bank,
and when.  Here a feature party learns only *how many* ids a request holds.

**The table** (per model version, rebuilt at every refresh).  A feature party
draws a fresh key ``k`` (:func:`vfl.crypto.oprf.new_key`) and, for every row ``x``
of its store, computes ``F_k(x)`` (an oblivious PRF, :mod:`vfl.crypto.oprf`) and
seals the row's **payload** under a key derived from it; the label party receives
the whole table, ``tag(F_k(x)) -> box``, sorted by tag and padded with random
entries (:func:`padded_count`), so that neither the order of the rows nor their
exact count shows::

    payload (linear)      status, [[u_k]] under the coordinator's key, one ciphertext per model
    payload (trees)       status, the leaves this party's splits allow, one bit per leaf of its trees
    payload (network)     status, h_k W_k as ring elements (one feature party only: no masks to deal)

**A request.** The label party blinds each id, ``B = r H1(x)`` (``r`` fresh and
uniform: ``B`` is a uniform point whatever ``x`` is), the feature party answers
``k B`` for each, and the label party unblinds, finds each id's entry by its tag
and opens it (:func:`open_payloads`).  An id the feature party does not hold has
no entry; the other entries do not open without their ``F_k(x)``, which only
``k`` gives.  From there a round ends as by id: linear scores are summed under the
coordinator's key (the payloads' ciphertexts packed into the public slot layout
by shifting, :func:`vfl.serving.scorers.linear.packed_sum`), masked, and decrypted by the coordinator; trees
and networks are finished by the label party.

The table is built from the store once, by :func:`build_table`; nothing of it
depends on the requests.  A payload is its family's (the share's ``payloads``, :mod:`vfl.serving.scorers`).  This module is the numbers of both sides; the services
(:mod:`vfl.serving.feature`, :mod:`vfl.serving.label`) keep the tables and run the
messages.
"""

from __future__ import annotations

import hashlib
import json
import os
import secrets
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vfl.crypto import oprf
from vfl.deploy.jsonfile import open_private
from vfl.errors import DataError, ProtocolError
from vfl.serving.messages import INCOMPLETE, OK, OUT_OF_RANGE, UNKNOWN
from vfl.serving.rounds import row_status

#: Bytes of a table's name (random, fresh per build) and of the AEAD's tag.
IDENT_BYTES = 16
BOX_OVERHEAD = 16
#: Bytes of a table sent in one message at most.
CHUNK_BYTES = 8 << 20
#: Rows sealed per task (in worker processes when there are many).
SEAL_CHUNK = 20_000
_DOMAIN = b"vfl-serve-private/1"


def padded_count(rows: int) -> int:
    """The entries of a table of ``rows`` rows: rounded up to a multiple of ``max(1024, 2^(bits(rows) - 4))``, so
    the label party learns the count to within 1/16 (and nothing below 1024)."""
    step = max(1024, 1 << max(0, rows.bit_length() - 4))
    return max(step, -(-rows // step) * step)


def domain(party: str, version: str, ident: bytes) -> bytes:
    """What every hash and box of one table is bound to: the party, the model version, the table's name."""
    return b"".join(len(p).to_bytes(4, "big") + p for p in (_DOMAIN, party.encode(), version.encode(), ident))


# -- payloads (the feature party) -------------------------------------------------------------------------

def bodies(status: np.ndarray, width: int) -> np.ndarray:
    """Payloads of ``width`` bytes after each row's status byte, zero: what a share's ``payloads`` fills."""
    out = np.zeros((len(status), 1 + width), dtype=np.uint8)
    out[:, 0] = status
    return out


def payloads(share, values: np.ndarray, layout=None, frac_bits: int = 0, noise=None) -> np.ndarray:
    """Every row's payload for ``share`` (its family's ``share.payloads``: :mod:`vfl.serving.scorers`):
    ``(rows, payload bytes)``, the first its status; ``noise(values, status, bits=False)``: the party's release
    noise (``bits``: on the sides of a tree party's splits, randomized response)."""
    status = row_status(values, np.ones(len(values), dtype=bool), share.complete)
    return share.payloads(values, status, layout, frac_bits, noise)


# -- the table (the feature party) -----------------------------------------------------------------------

@dataclass
class Table:
    """A feature party's table of one model version: its name, its key (never sent) and its entries."""

    ident: bytes
    version: str
    kind: str
    key: bytes
    payload_bytes: int
    count: int
    entries: bytes
    #: the coordinator's key the payloads are encrypted under (linear models), else ""
    key_fingerprint: str = ""

    @property
    def entry_bytes(self) -> int:
        return entry_bytes(self.payload_bytes)


def entry_bytes(payload_bytes: int) -> int:
    """Bytes of one table entry: its tag, then its sealed payload."""
    return oprf.TAG_BYTES + payload_bytes + BOX_OVERHEAD


def _seal_chunk(key: bytes, ids: list, rows: bytes, payload_bytes: int, context: bytes) -> bytes:
    """The entries (tag, then box) of a chunk of rows, end to end (run in a worker process when the table is large)."""
    out = bytearray()
    for i, key_id in enumerate(ids):
        payload = rows[i * payload_bytes:(i + 1) * payload_bytes]
        entry_tag, box = oprf.seal(oprf.prf(key, key_id.encode("utf-8"), context), payload, context)
        out += entry_tag + box
    return bytes(out)


def build_table(party: str, version: str, kind: str, ids: list, bodies: np.ndarray, key_fingerprint: str = "",
                progress=None) -> Table:
    """Seal every row's payload under its ``F_k(id)``, add random entries up to :func:`padded_count`, sort by tag.

    ``progress(done, total)`` is called as chunks are sealed.  Large tables are
    sealed by two worker processes (joblib), the key handed to them over a local pipe.
    """
    if len(set(ids)) != len(ids):
        raise DataError(f"party {party}: two rows of its store have the same id")
    ident, key = secrets.token_bytes(IDENT_BYTES), oprf.new_key()
    context = domain(party, version, ident)
    payload_bytes = bodies.shape[1]
    size = entry_bytes(payload_bytes)
    chunks = [(ids[s:s + SEAL_CHUNK], bodies[s:s + SEAL_CHUNK].tobytes()) for s in range(0, len(ids), SEAL_CHUNK)]
    count = padded_count(len(ids))
    table = np.empty((count, size), dtype=np.uint8)
    table[len(ids):] = np.frombuffer(os.urandom((count - len(ids)) * size), dtype=np.uint8).reshape(
        count - len(ids), size)      # random entries: pseudorandom tags and boxes look alike
    at = 0
    if len(chunks) > 1:
        from joblib import Parallel, delayed

        tasks = (delayed(_seal_chunk)(key, part, rows, payload_bytes, context) for part, rows in chunks)
        sealed = Parallel(n_jobs=2, return_as="generator")(tasks)
    else:
        sealed = (_seal_chunk(key, part, rows, payload_bytes, context) for part, rows in chunks)
    for entries in sealed:
        block = np.frombuffer(entries, dtype=np.uint8).reshape(-1, size)
        table[at:at + len(block)] = block
        at += len(block)
        if progress is not None:
            progress(at, len(ids))
    high, low = (np.ascontiguousarray(table[:, s:s + 8]).view(">u8").ravel().astype(np.uint64) for s in (0, 8))
    entries = table[np.lexsort((low, high))].tobytes()          # sorted by tag
    return Table(ident, version, kind, key, payload_bytes, count, entries, key_fingerprint)


def source_digest(shard: bytes, ids: list, values: np.ndarray, key_fingerprint: str) -> str:
    """What a table is built from: the shard's bytes, every row, the coordinator's key (a table kept on disk is
    used again only for the same)."""
    digest = hashlib.sha256()
    for part in (shard, "\n".join(ids).encode("utf-8"), np.ascontiguousarray(values, dtype="<f8").tobytes(),
                 key_fingerprint.encode()):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


def write_table(path, table: Table, digest: str) -> None:
    """Keep ``table`` (its key included) at ``path``, readable by its owner only, for a restart to use again."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    head = json.dumps({"format": "vfl-private-table/1", "version": table.version, "kind": table.kind,
                       "ident": table.ident.hex(), "key": table.key.hex(), "payload_bytes": table.payload_bytes,
                       "count": table.count, "key_fingerprint": table.key_fingerprint, "digest": digest})
    aside = path.with_suffix(".tmp")
    with open_private(aside, "wb") as f:
        f.write(head.encode() + b"\n" + table.entries)
    os.replace(aside, path)


def read_table(path, version: str, digest: str) -> Table | None:
    """The table kept at ``path`` if it was built from the same source (``digest``) for ``version``, else None."""
    try:
        with open(path, "rb") as f:
            head = json.loads(f.readline())
            if head.get("format") != "vfl-private-table/1" or head.get("digest") != digest or \
                    head.get("version") != version:
                return None
            table = Table(bytes.fromhex(head["ident"]), version, head["kind"], bytes.fromhex(head["key"]),
                          int(head["payload_bytes"]), int(head["count"]), f.read(), head["key_fingerprint"])
    except (OSError, ValueError, KeyError, TypeError):
        return None                         # absent, or not a table: built again
    return table if len(table.entries) == table.count * table.entry_bytes else None


def evaluate(table: Table, points: bytes, peer: str) -> bytes:
    """The feature party's whole part of a request: ``k B`` for each blinded point (each checked)."""
    if not isinstance(points, bytes) or not points or len(points) % oprf.POINT_BYTES:
        raise ProtocolError(f"{peer} sent blinded points that are not whole {oprf.POINT_BYTES}-byte points")
    size = oprf.POINT_BYTES
    return b"".join(oprf.evaluate(table.key, [points[i:i + size] for i in range(0, len(points), size)]))


# -- the table (the label party) -------------------------------------------------------------------------

class HeldTable:
    """A feature party's table as the label party holds it: sorted entries, found by tag (binary search)."""

    def __init__(self, party: str, version: str, ident: bytes, kind: str, payload_bytes: int, count: int,
                 entries: bytes, key_fingerprint: str = ""):
        self.party, self.version, self.ident, self.kind = party, version, ident, kind
        self.payload_bytes, self.count, self.key_fingerprint = payload_bytes, count, key_fingerprint
        self.entry_bytes = entry_bytes(payload_bytes)
        if len(entries) != count * self.entry_bytes:
            raise ProtocolError(f"{party} sent a table of {len(entries)} bytes, not {count} entries of "
                                f"{self.entry_bytes}")
        self.entries = entries
        rows = np.frombuffer(entries, dtype=np.uint8).reshape(count, self.entry_bytes)
        # the tags' first 8 bytes, as native integers (a big-endian array would be converted at every search)
        self._keys = np.ascontiguousarray(rows[:, :8]).view(">u8").ravel().astype(np.uint64)
        if count > 1 and np.any(self._keys[1:] < self._keys[:-1]):
            raise ProtocolError(f"{party} sent a table whose entries are not sorted by tag")
        self.context = domain(party, version, ident)

    def find(self, entry_tag: bytes) -> bytes | None:
        """The box of the entry with this tag, or None."""
        first = int.from_bytes(entry_tag[:8], "big")
        at = int(np.searchsorted(self._keys, np.uint64(first)))
        size, tag_bytes = self.entry_bytes, oprf.TAG_BYTES
        while at < self.count and int(self._keys[at]) == first:
            start = at * size
            if self.entries[start:start + tag_bytes] == entry_tag:
                return self.entries[start + tag_bytes:start + size]
            at += 1
        return None


def blind(table: HeldTable, ids: list) -> tuple[bytes, list]:
    """The label party's request to one feature party: the blinded points of ``ids``, and the blinds it keeps."""
    points, blinds = oprf.blind([i.encode("utf-8") for i in ids], table.context)
    return b"".join(points), blinds


def open_payloads(table: HeldTable, ids: list, evaluated, blinds: list, peer: str) -> tuple[np.ndarray, list]:
    """Per id: the feature party's status (:data:`UNKNOWN` where its table has no entry) and its payload body.

    Raises
    ------
    ProtocolError
        The answer is not one valid point per id, or an entry does not open (a table tampered with).
    """
    size = oprf.POINT_BYTES
    if not isinstance(evaluated, bytes) or len(evaluated) != size * len(ids):
        raise _bad(peer, f"an 'evaluated' answer that is not {len(ids)} points")
    try:
        points = oprf.unblind([evaluated[i:i + size] for i in range(0, len(evaluated), size)], blinds)
    except ProtocolError as exc:
        raise _bad(peer, f"an 'evaluated' answer with a bad point: {exc}") from None
    status = np.full(len(ids), UNKNOWN, dtype=np.int64)
    bodies: list = [None] * len(ids)
    for j, (key_id, point) in enumerate(zip(ids, points)):
        output = oprf.finalize(key_id.encode("utf-8"), point, table.context)
        box = table.find(oprf.tag(output))
        if box is None:
            continue
        try:
            payload = oprf.open_sealed(output, box, table.context)
        except ProtocolError:
            raise _bad(peer, "a table entry that does not open under its id's PRF output (tampered with, or "
                             "another table's)") from None
        code = payload[0]
        if code not in (OK, INCOMPLETE, OUT_OF_RANGE) or len(payload) != table.payload_bytes:
            raise _bad(peer, f"a table entry with status {code}")
        status[j], bodies[j] = code, payload[1:]
    return status, bodies


def _bad(peer: str, problem: str) -> ProtocolError:
    error = ProtocolError(f"{peer} sent {problem}")
    error.party = peer
    return error


def fingerprint(table: Table | HeldTable) -> str:
    """A short public name of a table, for logs."""
    return hashlib.sha256(table.ident).hexdigest()[:12]
