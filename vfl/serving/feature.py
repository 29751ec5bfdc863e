"""A feature party's service: its own store and model versions, answering the label party's rounds.

It links to the label party and (linear models) to the coordinator, whose
public key it takes from the coordinator itself (in the coordinator's hello), so
no other party can hand it a key of its own; a split network's feature party
links to the coordinator when there are two feature parties or more, and takes
its masks from it.  Then it answers, one message at
a time, what the label party asks (:mod:`vfl.serving.messages`):

* ``load``: (linear models: once it holds the coordinator's key, so that the
  label party counts it ready only then) read its shard of a version from ``MODELS/VERSION/model_NAME.json``,
  check it (and that its store has the shard's columns), and keep it, with the
  versions the label party says to keep; answer the training's fingerprint;
* ``score`` (linear): look the ids up in its store, and answer one status per id
  and its partial scores encrypted under the coordinator's key (0 for ids it
  cannot score); where the ``load`` asked for reasons and it consents
  (``reason_columns`` in its ``[parties.NAME]`` table, checked as a release at ``load``), per id the
  index of the column it names (:mod:`vfl.serving.reasons`);
* ``leaves`` (trees): look the ids up, and answer one status per id and, per id
  and tree, the leaves its own splits allow;
* private queries (:mod:`vfl.serving.private`): a ``load`` that asks for tables
  has it build, in the background, its table of the version from every row of its
  store (``tables = 2``: again, from the store as it is now: a refresh), while any
  table it built before keeps serving; ``table`` sends the newest table once built
  (in chunks; ``table_pending`` until then), and ``evaluate`` applies a table's key
  to blinded points: the whole of a private request, which names no id;
* ``part`` (split networks): look the ids up, and answer one status per id and
  its part ``h_k W_k`` of the interactive layer per id as ring elements
  (:mod:`vfl.crypto.ring`), plus the mask the coordinator dealt for the round's
  token when there are two feature parties or more; an id it cannot score gets
  uniform ring elements instead of a part, so that the sum the label party
  opens for that id shows nothing of the other parties' parts.

What differs by family — the release checks at ``load``, the ``loaded`` answer's fields, a table's payloads and
the answer to a round's request (``score``, ``leaves``, ``part``) — is the share's, in its family's scorer
(:mod:`vfl.serving.scorers`); this service keeps the links, the key or masks, the versions and the tables.

Anything it cannot do is a ``failed`` answer naming the reason without a value
of its data (the full story stays in its own log); it never learns a score.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from vfl.crypto import Context, FixedPoint, PublicKey, oprf
from vfl.errors import ConfigurationError, DataError, ProtocolError, VFLError
from vfl.families import FAMILIES
from vfl.protocols.release import ReleasePolicy
from vfl.serving import messages, private, reasons
from vfl.serving.links import Runtime, serving_coordinator
from vfl.serving.messages import OK
from vfl.serving.models import load_share, shard_path
from vfl.serving.rounds import Layout, row_status

log = logging.getLogger("vfl.serving")
#: Ids in one round at most (the largest ``[serving] max_batch``).
MAX_ROUND_IDS = 100_000
#: Seconds a round waits for the coordinator's key (the coordinator restarted: the label party may hold its new
#: key a moment before this party), and a ``load`` (this party just linked: its key may come a moment later).
KEY_WAIT, LOAD_KEY_WAIT = 2.0, 10.0
#: Ring elements of one round's masks at most (ids times the interactive layer's width).
MAX_MASK_VALUES = 4_000_000
#: Seconds a dealt mask is kept for the round that names its token (a round that failed elsewhere leaves it),
#: and masks kept at most (the oldest go first).
MASK_TTL, MAX_MASKS = 60.0, 256
#: Seconds a table's build waits for the coordinator's key (linear models).
TABLE_KEY_WAIT = 600.0


@dataclass
class Building:
    """One model version's private table at a feature party: the newest built, and the build under way."""

    table: private.Table | None = None
    building: bool = False
    again: bool = False             # a refresh asked for while building: build once more after
    refresh: bool = False           # the build under way must draw a new key (not take the table kept on disk)
    percent: int = 0
    error: str = ""


class Masks:
    """The masks the coordinator dealt, by round token, until a ``part`` answer takes its own (once) or they age."""

    def __init__(self):
        self._masks: dict[bytes, tuple[float, bytes]] = {}
        self._arrived = threading.Condition()

    def put(self, tag: bytes, values: bytes) -> None:
        now = time.monotonic()
        with self._arrived:
            for old in [t for t, (when, _) in self._masks.items() if now - when > MASK_TTL]:
                del self._masks[old]
            while len(self._masks) >= MAX_MASKS:
                del self._masks[next(iter(self._masks))]
            self._masks[tag] = (now, values)
            self._arrived.notify_all()

    def take(self, tag: bytes, wait: float) -> bytes | None:
        """The mask of ``tag`` (forgotten here: a mask is used once), waiting up to ``wait`` s; None if none came."""
        with self._arrived:
            self._arrived.wait_for(lambda: tag in self._masks, wait)
            entry = self._masks.pop(tag, None)
        return None if entry is None else entry[1]


class FeatureService:
    """Party ``role``'s service (a feature party of ``config``), answering from ``store``.

    Parameters
    ----------
    config : FederationConfig
    role : str
    store : vfl.serving.store.Store
    settings : ServingSettings, optional
        Its ``[serving]`` settings (default: the federation file's).
    workdir : path-like, optional
        Its work directory, which keeps its release ledger and noise key (:mod:`vfl.protocols.release`;
        ``vfl serve`` passes ``--workdir``); without one, a ledger of this process.
    """

    def __init__(self, config, role: str, store, settings=None, workdir=None):
        self.config, self.role, self.store = config, role, store
        entry = config.party(role)
        self.release = (ReleasePolicy.for_party(entry, workdir) if workdir is not None else ReleasePolicy.in_process(
            role, "serve", allowed=entry.allow_reconstruction, how=f"allow_reconstruction = true in its own "
            f"[parties.{role}] table", **{k: v for k, v in (entry.release_dp or {}).items()}))
        self.workdir = Path(workdir) if workdir is not None else None     # keeps its private tables
        self.settings = settings or config.serving_of(role)
        roster = config.roster
        self.label, self.coordinator = roster.label, serving_coordinator(config)
        self.shares: dict[str, object] = {}
        self.layout: Layout | None = None       # with the coordinator's key (linear models)
        self.masks = Masks()                    # the coordinator's masks (split networks)
        self.dealer = None                      # its link to the coordinator (split networks), while up
        self.tables: dict[str, Building] = {}   # private queries: by model version
        self.named: dict[bytes, private.Table] = {}     # every table a request may name: each version's last two
        self._tables = threading.Lock()
        self._lock = threading.Lock()
        self._keyed = threading.Condition()     # notified when the coordinator's key (or link) arrives
        peers = [self.label] + ([self.coordinator] if self.coordinator else [])
        self.runtime = Runtime(config, role, peers, self._on_link)

    def start(self) -> "FeatureService":
        self.runtime.start()
        return self

    def close(self) -> None:
        self.runtime.close()
        self.store.close()

    def _on_link(self, channel) -> None:
        if channel.peer == self.coordinator:
            if self.config.family.dealer:
                self._keep_masks(channel)
            else:
                self._keep_key(channel)
        else:
            self._answer(channel)

    # -- the coordinator's masks (split networks) ----------------------------------------------
    def _keep_masks(self, channel) -> None:
        """Keep every mask the coordinator deals, by its round's token, until its link fails."""
        with self._keyed:
            self.dealer = channel
            self._keyed.notify_all()
        try:
            while True:
                message = channel.recv(1.0)
                if message is None:
                    continue
                if message.name != "part_mask" or not isinstance(message.fields.get("values"), bytes):
                    raise ProtocolError(f"{channel.peer} sent {message.name!r}; the coordinator of a split network "
                                        "sends only masks")
                self.masks.put(messages.token(message, channel.peer), message.fields["values"])
        finally:
            with self._keyed:
                if self.dealer is channel:
                    self.dealer = None

    # -- the coordinator's key -----------------------------------------------------------------
    def _keep_key(self, channel) -> None:
        """Take the coordinator's public key from its hello; forget it when the link to the coordinator fails."""
        key = channel.hello.get("key")
        if not isinstance(key, bytes):
            raise ProtocolError(f"{channel.peer}'s hello carries no public key")
        settings = self.config.training
        context = Context(PublicKey.from_bytes(key), FixedPoint(settings.frac_bits))
        context.encrypt([0.0])                      # build the encryption tables now, not in the first round
        layout = Layout(context, settings.packed_prediction, settings.score_bound,
                        len(self.config.roster.data_parties))
        with self._keyed:
            self.layout = layout
            self._keyed.notify_all()
        with self._tables:          # tables encrypted under another key of the coordinator: build them again
            stale = [v for v, b in self.tables.items() if b.table is not None and b.table.key_fingerprint
                     and b.table.key_fingerprint != layout.context.public_key.fingerprint]
        for version in stale:
            self._build(version, refresh=True)
        try:
            while True:
                channel.recv(1.0)           # the coordinator sends nothing more: this ends when its link fails
        finally:
            with self._keyed:
                if self.layout is layout:
                    self.layout = None

    def _key(self, fingerprint: str | None, wait: float) -> Layout | None:
        """The layout under the coordinator's key (of ``fingerprint``, if given), waiting up to ``wait`` s for it:
        after a restart of the coordinator, the label party may hold its new key a moment before this party."""
        with self._keyed:
            self._keyed.wait_for(lambda: self.layout is not None and (
                fingerprint is None or self.layout.context.public_key.fingerprint == fingerprint), wait)
            return self.layout

    # -- the label party's requests ----------------------------------------------------------------
    def _answer(self, channel) -> None:
        handlers = {"load": self._load, "table": self._table, "evaluate": self._evaluate,
                    **dict.fromkeys(round_requests(), self._round)}
        while True:
            message = channel.recv(1.0)
            if message is None:
                continue
            round_id = message.fields.get("round")
            handler = handlers.get(message.name)
            try:
                if handler is None or not isinstance(round_id, int):
                    raise ProtocolError(f"{channel.peer} sent {message.name!r}, which a feature party does not answer")
                name, kind, fields = handler(message)
            except (DataError, ConfigurationError, ProtocolError) as exc:
                log.warning("party %s: %s: %s", self.role, message.name, exc)
                name, kind, fields = "failed", "public", {"reason": _named(self.role, _public(exc))}
            except Exception as exc:  # noqa: BLE001 - a fault answering one message fails that round, not the link
                log.exception("party %s: answering %r failed", self.role, message.name)
                name, kind, fields = "failed", "public", {
                    "reason": f"party {self.role}: internal error ({type(exc).__name__}) answering "
                              f"{message.name!r}; its log says more"}
            channel.send(name, kind, round=round_id if isinstance(round_id, int) else -1, **fields)

    def _share(self, message):
        version = messages.version(message, "version", self.label)
        with self._lock:
            share = self.shares.get(version)
        if share is None:
            raise ConfigurationError(f"model version {version} is not loaded here")
        return share

    def _load(self, message):
        version = messages.version(message, "version", self.label)
        keep = messages.text(message, "keep", self.label, 1000).split(",")
        if self.config.family.dealer and self.coordinator is not None:
            with self._keyed:
                if not self._keyed.wait_for(lambda: self.dealer is not None, LOAD_KEY_WAIT):
                    raise ConfigurationError(f"it is not linked to the coordinator {self.coordinator}, which deals "
                                             "the masks, yet")
        elif self.coordinator is not None and self._key(None, LOAD_KEY_WAIT) is None:
            raise ConfigurationError(f"it holds no key of the coordinator {self.coordinator} yet (not linked to it)")
        sign = message.fields.get("reasons", 0.0)
        if sign not in (-1.0, 0.0, 1.0) or isinstance(sign, bool):
            raise ProtocolError(f"{self.label} asked for reasons on the side {sign!r} (+1, -1, or 0: none)")
        tables = message.fields.get("tables", 0)
        share = load_share(self.settings.models, version, self.role, "feature", self.config.family.name)
        self.store.check_columns(share.columns)
        consent = reasons.consent(share, self.config.party(self.role).reason_columns or {}, self.role)
        share.check_release(self, version, consent, sign, tables)
        with self._lock:
            self.shares[version] = share
            for old in [v for v in self.shares if v not in keep and v != version]:
                del self.shares[old]
        with self._tables:
            for old in [v for v in self.tables if v not in keep and v != version]:
                del self.tables[old]
                self._drop_named(old)
        log.info("party %s: model version %s loaded", self.role, version)
        if tables in (1, 2):
            self._build(version, refresh=tables == 2)
        return "loaded", "public", {"trained_with": share.trained_with, "width": share.width,
                                    **share.loaded_fields(self.role, sign)}

    # -- private queries ----------------------------------------------------------------------
    def noised(self, version: str, u: np.ndarray, ids, status, bits: bool = False) -> np.ndarray:
        """The partial scores ``u`` (``bits``: the sides of a tree party's splits, randomized response) with this
        party's noise for ``ids`` in ``version`` (with DP; the same each time)."""
        if self.release.epsilon is None or (bits and np.shape(u)[1] == 0):
            return u
        ok = np.flatnonzero(status == OK)
        if len(ok):
            u = u.copy()
            noisy = self.release.noised(u[ok], [ids[i] for i in ok], version, bits=bits)[0]
            u[ok] = noisy > 0.5 if bits else noisy
        return u

    def _build(self, version: str, refresh: bool) -> None:
        """Build the table of ``version`` in the background (again if ``refresh``), unless one is built or building."""
        with self._tables:
            state = self.tables.setdefault(version, Building())
            if state.building:
                state.again = state.again or refresh
                return
            if state.table is not None and not refresh:
                return
            state.building, state.percent, state.error, state.refresh = True, 0, "", refresh
        threading.Thread(target=self._build_now, args=(version, state), daemon=True,
                         name=f"vfl-table-{self.role}-{version}").start()

    def _build_now(self, version: str, state: Building) -> None:
        while True:
            started = time.perf_counter()
            try:
                with self._lock:
                    share = self.shares.get(version)
                if share is None:
                    raise ConfigurationError(f"model version {version} is not loaded here any more")
                layout = self._key(None, TABLE_KEY_WAIT) if share.keyed else None
                if share.keyed and layout is None:
                    raise ConfigurationError(f"it holds no key of the coordinator {self.coordinator} to encrypt its "
                                             "partial scores under")
                ids, values = self.store.rows(share.columns)
                key = layout.context.public_key.fingerprint if layout is not None else ""
                digest = private.source_digest(shard_path(self.settings.models, version, self.role).read_bytes(),
                                               ids, values, key)
                kept = self.workdir / "tables" / f"{version}.table" if self.workdir is not None else None
                table = None if state.refresh or kept is None else private.read_table(kept, version, digest)
                how = "kept on disk, read"
                if table is None:
                    how = "built"
                    bodies = private.payloads(share, values, layout, self.config.training.frac_bits,
                                              noise=lambda u, status, bits=False: self.noised(version, u, ids,
                                                                                               status, bits))

                    def progress(done, total):
                        state.percent = int(100 * done / max(1, total))

                    table = private.build_table(self.role, version, share.kind, ids, bodies, key, progress)
                    if kept is not None:
                        private.write_table(kept, table, digest)
                with self._tables:              # the last one keeps serving rounds under way; older ones go
                    if self.tables.get(version) is not state:
                        raise ConfigurationError(f"model version {version} was dropped while its table was built")
                    self._drop_named(version, keep=state.table)
                    state.table, state.error = table, ""
                    self.named[table.ident] = table
                log.info("party %s: private table %s of model version %s: %d rows in %d entries of %d bytes, "
                         "%s in %.1f s", self.role, private.fingerprint(table), version, len(ids), table.count,
                         table.entry_bytes, how, time.perf_counter() - started)
            except (VFLError, ValueError, OSError) as exc:
                state.error = _public(exc)
                log.warning("party %s: private table of model version %s: %s", self.role, version, exc)
            except Exception as exc:  # noqa: BLE001 - a fault of its own: said, never a build that hangs its asker
                state.error = f"its private table of model version {version} failed ({type(exc).__name__})"
                log.exception("party %s: private table of model version %s", self.role, version)
            with self._tables:
                if not state.again:
                    state.building = False
                    return
                state.again, state.refresh = False, True

    def _drop_named(self, version: str, keep=None) -> None:
        """Forget the tables of ``version`` a request may name, but ``keep`` (under ``self._tables``)."""
        for ident in [i for i, t in self.named.items() if t.version == version and t is not keep]:
            del self.named[ident]

    def _table(self, message):
        """The newest table of a version (a chunk of it from ``offset``), or how far its build is."""
        version = messages.version(message, "version", self.label)
        after = message.fields.get("after", b"")
        offset = messages.integer(message, "offset", self.label, 0, 1 << 40)
        with self._tables:
            state = self.tables.get(version)
            table = None if state is None else state.table
        if state is None:
            raise ConfigurationError(f"it was not asked to build a private table of model version {version}")
        if table is None or table.ident == after:
            failed = "" if state.building or not state.error else \
                f"its private table of model version {version} could not be built: {state.error}"
            if failed and table is None:
                raise ConfigurationError(failed)
            # the newest table is the one the label party holds; a rebuild that failed left it serving: say both
            return "table_pending", "public", {"percent": state.percent, "building": int(state.building),
                                               "reason": failed}
        per = max(1, private.CHUNK_BYTES // table.entry_bytes)
        data = table.entries[offset * table.entry_bytes:(offset + per) * table.entry_bytes]
        return "table_part", "ciphertext", {"table": table.ident, "count": table.count, "offset": offset,
                                            "payload_bytes": table.payload_bytes, "model": table.kind,
                                            "key": table.key_fingerprint, "entries": data}

    def _evaluate(self, message):
        """``k B`` for each blinded point, under the key of the table the request names: nothing else."""
        ident = message.fields.get("table")
        with self._tables:
            table = self.named.get(ident) if isinstance(ident, bytes) else None
        if table is None:
            raise ConfigurationError("it holds no private table by the name the request gives (it was rebuilt, "
                                     "or this party restarted); the label party fetches the new one")
        points = message.fields.get("points")
        if isinstance(points, bytes) and len(points) > MAX_ROUND_IDS * oprf.POINT_BYTES:
            raise ProtocolError(f"more than {MAX_ROUND_IDS} blinded points")
        return "evaluated", "masked", {"points": private.evaluate(table, points, self.label)}

    def _by_id(self) -> None:
        if self.settings.queries == "private":
            raise ConfigurationError("it answers private queries only ([serving] queries = \"private\"): it does "
                                     "not look ids up for the label party")

    def _round(self, message):
        """A round's request (each family's, :func:`round_requests`), answered by the version's share (its
        ``answer``); a share of another family refuses it."""
        share = self._share(message)
        if share.request != message.name:
            raise ProtocolError(round_requests()[message.name].format(kind=share.kind))
        return share.answer(self, message)

    # -- what each family's answers use (vfl.serving.scorers) ----------------------------------------------------
    def rows(self, message, share):
        """The rows of the ids ``message`` names (``share``'s columns; none under private queries only): the values,
        a status per id (:func:`~vfl.serving.rounds.row_status`, ``share.complete``), and the ids."""
        self._by_id()
        ids = messages.unpack_ids(message, self.label, MAX_ROUND_IDS)
        values, found = self.store.lookup(ids, share.columns)
        return values, row_status(values, found, share.complete), ids

    def key(self, fingerprint: str) -> Layout | None:
        """The layout under the coordinator's key of ``fingerprint``, waiting up to :data:`KEY_WAIT` s for it (the
        coordinator restarted: the label party may hold its new key a moment before this party); None if unlinked,
        else the key it holds (perhaps another)."""
        return self._key(fingerprint, KEY_WAIT)


@functools.cache
def round_requests() -> dict[str, str]:
    """The round requests a feature party answers, one per family (its scorer's ``REQUEST``), and what a party whose
    model answers another says to one (its ``REFUSED``; ``{kind}``: the party's model)."""
    scorers = [family.module("scorer") for family in FAMILIES.values()]
    return {scorer.REQUEST: scorer.REFUSED for scorer in scorers}


def _named(role: str, reason: str) -> str:
    """``reason`` starting with the party's name, once (most of its errors name it already)."""
    return reason if reason.startswith(f"party {role}:") else f"party {role}: {reason}"


def _public(exc: BaseException) -> str:
    """What a feature party tells the label party of its own failure: no value of its data."""
    if isinstance(exc, DataError):
        return f"its model or store is not usable ({type(exc).__name__}; the details are in its log)"
    return str(exc)
