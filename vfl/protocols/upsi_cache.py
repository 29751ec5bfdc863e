"""The unbalanced PSI's cache files: the large party's key and outputs, the small party's copy of them.

Two kinds of file, each owned by one party, in its own cache folder (``vfl party``: ``WORKDIR/psi-cache``;
:func:`vfl.psi.intersect`: ``cache_dir/PARTY``), written owner-only (mode 0600, folder 0700), atomically
(a temporary file renamed over the old one):

* ``unbalanced-psi-key.bin`` (:class:`OwnCache`, the large party's): its secret scalar ``k``, the key id,
  a digest of its ids (:func:`set_digest`), and ``F_k(x)`` for every id (16 bytes each, sorted) with the
  row each came from.  Built once over the whole set (the offline phase); rebuilt, **with a fresh key**,
  when the ids' digest differs from the one recorded (any id added, removed or changed, or the rows
  reordered), so a partner's old copy and new copy cannot be linked.
* ``unbalanced-psi-from-PEER.bin`` (:class:`PeerCache`, the small party's): the large party ``PEER``'s
  outputs as received, cut to ``w`` bytes and sorted, with the key id and row count they belong to.
  Fetched again when the large party announces another key id or row count, or a run needs more bytes.

Every file starts with ``VFL-UPSI``, a JSON header (format version, kind, owner, sizes) and ends with
the SHA-256 of all that precedes it.  A file that is not such a file, of another format version, of
another kind or owner, or whose checksum fails is **refused** with a :class:`CacheError` naming it and
saying what to do (remove it: the next run rebuilds it); a stale one (another set, another key) is
rebuilt, and :func:`load_own` / :func:`load_peer` say so through ``note``.  Nothing is unpickled.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

import numpy as np

from vfl.crypto import upsi
from vfl.errors import DataError

MAGIC = b"VFL-UPSI"
#: The format version of both kinds of file.
FORMAT = 1
OWN_KIND, PEER_KIND = "own-key", "peer-outputs"
_HEAD = 4          # bytes of the header's length
_SUM = 32          # bytes of the closing checksum

Note = Callable[[str], None]


class CacheError(DataError):
    """A cache file that cannot be used: not one, damaged, of another format, kind or party (the message names it)."""


#: How :func:`set_digest` frames the ids (the prefix of the digests it returns; a file recording a digest
#: without it was built by an older vfl, and is rebuilt).
DIGEST_SCHEME = "set2"
_CHUNK = 1 << 12        # ids joined at a time: a few tens of kB, hashed while in the processor's cache


def set_digest(ids: Sequence[bytes]) -> str:
    """SHA-256 of the ids in row order, framed so that no other list gives the same input: what says the large
    party's set has changed.  ``"set2:" + hex``.

    Ids are joined with a NUL byte between them, chunk by chunk, which frames them unambiguously when no id
    holds a NUL byte (checked on each chunk: the NULs counted are the separators); otherwise every id is
    preceded by its length (another tag, so the two framings never meet).  One pass of C-level joins and
    SHA-256 over the bytes (about 0.04 µs an id), no Python work per id.  Raises ``TypeError`` if an id is
    not bytes-like.
    """
    n = len(ids)
    h = hashlib.sha256(b"vfl-upsi-2/set/nul" + n.to_bytes(8, "little"))
    sep = b"\0"
    for lo in range(0, n, _CHUNK):
        part = ids[lo:lo + _CHUNK]
        chunk = sep.join(part)
        if chunk.count(sep) != len(part) - 1:       # an id holds a NUL byte: frame by lengths instead
            return _framed_digest(ids)
        h.update(chunk)
        h.update(sep)
    return f"{DIGEST_SCHEME}:{h.hexdigest()}"


def _framed_digest(ids: Sequence[bytes]) -> str:
    lengths = np.fromiter(map(len, ids), dtype=np.int64, count=len(ids))
    h = hashlib.sha256(b"vfl-upsi-2/set/lengths" + len(ids).to_bytes(8, "little"))
    h.update(lengths.astype("<u8").tobytes())
    for lo in range(0, len(ids), _CHUNK):
        h.update(b"".join(ids[lo:lo + _CHUNK]))
    return f"{DIGEST_SCHEME}:{h.hexdigest()}"


def own_path(directory) -> Path:
    return Path(directory) / "unbalanced-psi-key.bin"


def peer_path(directory, peer: str) -> Path:
    safe = peer if re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", peer) and not peer.startswith(".") \
        else "x" + peer.encode("utf-8").hex()[:120]
    return Path(directory) / f"unbalanced-psi-from-{safe}.bin"


# -- the file format --------------------------------------------------------------------------
def _write(path: Path, header: dict, body: Sequence) -> Path:
    """Write ``MAGIC ‖ len ‖ header ‖ body ‖ SHA-256`` owner-only, through a temporary file renamed over ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    head = json.dumps(header, sort_keys=True).encode("utf-8")
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        os.fchmod(fd, 0o600)
        checksum = hashlib.sha256()
        with os.fdopen(fd, "wb") as f:
            for part in [MAGIC, len(head).to_bytes(_HEAD, "big"), head, *body]:
                part = memoryview(part).cast("B")
                checksum.update(part)
                f.write(part)
            f.write(checksum.digest())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return path


def _read(path: Path, kind: str, owner: str) -> tuple[dict, memoryview]:
    """The header and body of a cache file of ``kind`` belonging to ``owner``; a :class:`CacheError` otherwise.

    The file is mapped into memory, not copied: its checksum is computed over the mapping (SHA-256, a
    fraction of a second for 200 MB) and the body returned is a view of it.
    """
    remedy = "remove it and run again to rebuild it"
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    view = memoryview(data)
    if len(view) < len(MAGIC) + _HEAD + _SUM or bytes(view[:len(MAGIC)]) != MAGIC:
        raise CacheError(f"{path} is not an unbalanced-PSI cache file of vfl (no VFL-UPSI header): {remedy}")
    if hashlib.sha256(view[:-_SUM]).digest() != bytes(view[-_SUM:]):
        raise CacheError(f"{path} is damaged (its checksum does not match its contents): {remedy}")
    size = int.from_bytes(view[len(MAGIC):len(MAGIC) + _HEAD], "big")
    start = len(MAGIC) + _HEAD
    try:
        header = json.loads(bytes(view[start:start + size]).decode("utf-8"))
        if not isinstance(header, dict):
            raise ValueError
    except (ValueError, UnicodeDecodeError, RecursionError):
        raise CacheError(f"{path} is damaged (its header is not readable): {remedy}") from None
    if header.get("format") != FORMAT:
        raise CacheError(f"{path} has format version {header.get('format')!r}; this vfl reads version {FORMAT}: "
                         f"{remedy}")
    if header.get("kind") != kind:
        raise CacheError(f"{path} holds {header.get('kind')!r}, not {kind!r}: a foreign file; {remedy}")
    if header.get("party") != owner:
        raise CacheError(f"{path} belongs to party {header.get('party')!r}, not {owner!r}: a foreign file; {remedy}")
    return header, view[start + size:-_SUM]


def _number(header: dict, key: str, path: Path) -> int:
    value = header.get(key)
    if type(value) is not int or value < 0:
        raise CacheError(f"{path} is damaged (its header's {key!r} is {value!r}): remove it and run again")
    return value


def recorded_digest(directory) -> str | None:
    """The set digest in the large party's file header, unchecked (None without a readable one).

    Only to skip re-checking ids that match it: :func:`read_own` verifies the whole file afterwards.
    """
    try:
        with open(own_path(directory), "rb") as f:
            head = f.read(len(MAGIC) + _HEAD)
            if not head.startswith(MAGIC):
                return None
            header = json.loads(f.read(int.from_bytes(head[len(MAGIC):], "big")).decode("utf-8"))
        digest = header.get("digest") if isinstance(header, dict) else None
        return digest if isinstance(digest, str) else None
    except (OSError, ValueError, UnicodeDecodeError, RecursionError):
        return None


# -- the large party's file ---------------------------------------------------------------------
@dataclass
class OwnCache:
    """The large party's key and its outputs over its whole set.

    Attributes
    ----------
    key, key_id : bytes
        The secret scalar ``k`` and its public id.
    digest : str
        :func:`set_digest` of the ids the outputs were computed over.
    outputs : numpy.ndarray
        ``F_k(x)``, :data:`vfl.crypto.upsi.FULL_BYTES` bytes each, sorted (dtype ``S16``).
    rows : numpy.ndarray
        The row (position in the ids) of each sorted output.
    built : bool
        Whether this run built it (False: read from the file).
    """

    path: Path
    key: bytes
    key_id: bytes
    digest: str
    outputs: np.ndarray
    rows: np.ndarray
    built: bool = False

    def prefixes(self, width: int) -> np.ndarray:
        """The sorted outputs cut to ``width`` bytes (dtype ``S{width}``; still sorted): a copy, for sending."""
        full = self.outputs.view(np.uint8).reshape(-1, upsi.FULL_BYTES)
        return np.ascontiguousarray(full[:, :width]).view(f"S{width}").reshape(-1)

    def find(self, prefixes: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Where each ``width``-byte prefix (dtype ``S{width}``) lies among the sorted outputs, without cutting
        them all: ``(at, found, ambiguous)``, ``at`` the first output starting with it (where ``found``), and
        ``ambiguous`` where the next output starts with it too.

        The prefix padded with zero bytes sorts at or before every output that starts with it and after every
        smaller one, so one binary search over the full outputs finds the first that starts with it.
        """
        width, n = prefixes.dtype.itemsize, len(self.outputs)
        full = self.outputs.view(np.uint8).reshape(-1, upsi.FULL_BYTES)
        padded = np.zeros((len(prefixes), upsi.FULL_BYTES), dtype=np.uint8)
        padded[:, :width] = prefixes.view(np.uint8).reshape(-1, width)
        at = np.searchsorted(self.outputs, padded.view(f"S{upsi.FULL_BYTES}").reshape(-1))
        wanted = padded[:, :width]
        found = at < n
        found[found] = (full[at[found], :width] == wanted[found]).all(axis=1)
        after = found & (at + 1 < n)
        ambiguous = np.zeros(len(prefixes), dtype=bool)
        ambiguous[after] = (full[at[after] + 1, :width] == wanted[after]).all(axis=1)
        return at, found, ambiguous


def build_own(directory, party: str, ids: Sequence[bytes], digest: str | None = None) -> OwnCache:
    """Draw a fresh key, compute ``F_k(x)`` over every id, sort, and write :func:`own_path` (the offline phase)."""
    n = len(ids)
    if n >= 2 ** 32:
        raise DataError(f"party {party}: the unbalanced PSI keeps at most 2^32 - 1 rows")
    digest = digest or set_digest(ids)
    key, key_id = upsi.new_key()
    outputs = np.frombuffer(upsi.outputs(ids, key, key_id, upsi.FULL_BYTES), dtype=f"S{upsi.FULL_BYTES}")
    order = np.argsort(outputs, kind="stable")
    outputs, rows = outputs[order], order.astype("<u4")
    path = own_path(directory)
    _write(path, {"format": FORMAT, "kind": OWN_KIND, "party": party, "rows": n, "digest": digest,
                  "width": upsi.FULL_BYTES}, [key, key_id, outputs.tobytes(), rows.tobytes()])
    return OwnCache(path, key, key_id, digest, outputs, rows, built=True)


def read_own(directory, party: str) -> OwnCache:
    """The large party's file as it is (checked: format, kind, owner, checksum, owner-only mode)."""
    path = own_path(directory)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        raise CacheError(f"{path} holds party {party}'s secret PSI key and is readable by others (mode {mode:o}): "
                         "remove it (its key may have leaked) and run again to rebuild it with a fresh key")
    header, body = _read(path, OWN_KIND, party)
    n, width = _number(header, "rows", path), header.get("width")
    if width != upsi.FULL_BYTES or len(body) != 64 + n * (width + 4) or not isinstance(header.get("digest"), str):
        raise CacheError(f"{path} is damaged (its sizes do not add up): remove it and run again to rebuild it")
    key, key_id = bytes(body[:32]), bytes(body[32:64])
    outputs = np.frombuffer(body[64:64 + n * width], dtype=f"S{width}")
    rows = np.frombuffer(body[64 + n * width:], dtype="<u4")
    return OwnCache(path, key, key_id, header["digest"], outputs, rows)


def load_own(directory, party: str, ids: Sequence[bytes], note: Note | None = None,
             digest: str | None = None) -> OwnCache:
    """The large party's key and outputs for ``ids``: read and checked, or (re)built.

    Built when there is no file; rebuilt with a fresh key when the ids' digest differs from the file's
    (``note`` says so, naming the file).  A damaged, foreign or exposed file is a :class:`CacheError`.
    """
    path, digest = own_path(directory), digest or set_digest(ids)
    if not path.exists():
        if note:
            note(f"party {party}: no unbalanced-PSI key yet; evaluating the OPRF over its {len(ids):,} ids "
                 f"(once) into {path}")
        return build_own(directory, party, ids, digest)
    cache = read_own(directory, party)
    if cache.digest != digest or len(cache.rows) != len(ids):
        why = ("its set digest is of an older kind (built by an older vfl)"
               if not cache.digest.startswith(DIGEST_SCHEME + ":") and len(cache.rows) == len(ids)
               else f"its ids have changed since {path} was built (another set digest)")
        if note:
            note(f"party {party}: {why if why.startswith('its ids') else f'{path}: ' + why}; drawing a fresh key "
                 f"and evaluating the OPRF over its {len(ids):,} ids again (partners fetch the new outputs once)")
        del cache                   # unmaps the old file before it is replaced (a mapped file cannot be, on Windows)
        return build_own(directory, party, ids, digest)
    return cache


# -- the small party's copy ---------------------------------------------------------------------------
@dataclass
class PeerCache:
    """The large party's outputs as the small party keeps them: ``width`` bytes each, sorted."""

    path: Path
    peer: str
    key_id: bytes
    outputs: np.ndarray

    @property
    def width(self) -> int:
        return self.outputs.dtype.itemsize


def write_peer(directory, party: str, peer: str, key_id: bytes, outputs: np.ndarray) -> PeerCache:
    path = peer_path(directory, peer)
    _write(path, {"format": FORMAT, "kind": PEER_KIND, "party": party, "peer": peer, "key_id": key_id.hex(),
                  "rows": len(outputs), "width": outputs.dtype.itemsize}, [outputs.tobytes()])
    return PeerCache(path, peer, key_id, outputs)


def load_peer(directory, party: str, peer: str, key_id: bytes, rows: int, width: int,
              note: Note | None = None) -> PeerCache | None:
    """The small party's copy of ``peer``'s outputs if it is current (the same key id and row count, at least
    ``width`` bytes); None if there is none or it is stale (``note`` says which, naming the file).

    A damaged or foreign file is a :class:`CacheError`.
    """
    path = peer_path(directory, peer)
    if not path.exists():
        if note:
            note(f"party {party}: no copy of {peer}'s OPRF outputs yet; fetching them once into {path}")
        return None
    header, body = _read(path, PEER_KIND, party)
    if header.get("peer") != peer:
        raise CacheError(f"{path} holds the outputs of party {header.get('peer')!r}, not {peer!r}: a foreign file; "
                         "remove it and run again")
    n, have = _number(header, "rows", path), _number(header, "width", path)
    if not 8 <= have <= upsi.FULL_BYTES or len(body) != n * have or not isinstance(header.get("key_id"), str):
        raise CacheError(f"{path} is damaged (its sizes do not add up): remove it and run again")
    why = ("it belongs to an older key of " + peer if header["key_id"] != key_id.hex()
           else f"it holds {n:,} outputs and {peer} now has {rows:,} rows" if n != rows
           else f"its outputs have {have} bytes and this run needs {width}" if have < width else None)
    if why:
        if note:
            note(f"party {party}: {path} is stale ({why}); fetching {peer}'s outputs again")
        return None
    return PeerCache(path, peer, key_id, np.frombuffer(body, dtype=f"S{have}"))
