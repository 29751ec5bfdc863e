"""The label party's service: model versions, the links to every peer, and one round per batch of ids.

A round scores a batch of ids with one model version, every party using its own
shard of that version:

* **linear models** (:mod:`vfl.serving.rounds`): the label party looks its own
  rows up (or takes them from the request), asks every feature party for its
  encrypted partial scores of the ids it can score itself, adds its own and a
  fresh mask, and has the coordinator decrypt the masked sums;
* **trees**: it asks every feature party that owns splits for the leaves its
  splits allow, intersects them with its own, and adds the leaf values
  (:func:`vfl.protocols.trees.inference.raw_scores`);
* **split networks**: it asks every feature party for its part of the
  interactive layer of the ids (with two feature parties or more, masked with
  masks the coordinator deals for the round, which cancel in the sum: the
  prediction of :mod:`vfl.protocols.mlp.inference`), adds its own part and
  runs the top model.

**Private queries** (``[serving] queries``, "auto" by default:
:mod:`vfl.serving.private`).  Every feature party builds, per version, a table
of sealed payloads of all its rows that the label party fetches once; a round
then sends each feature party blinded points only, and the label party opens
the entries of its own ids.  A version is used only once the label party holds
every feature party's table of it; a refresh (:meth:`LabelService.reload` of any
version, the current one included) has every feature party build its table
again from its store while the tables it holds keep serving.

**Reasons** (``[serving] reasons``, :mod:`vfl.serving.reasons`): a linear round
then decrypts each feature party's total on its own, and trees compute the
parties' Shapley values from the masks the round gives anyway; each answer
carries the codes of its largest contributions toward the adverse side.

What differs by family (the round itself, a ``loaded`` answer's checks, whether private queries or reasons fit,
an id's answer) is its scorer's and its share's (:mod:`vfl.serving.scorers`); this service keeps the links, the
private tables, the versions and their reload, and the deadlines.

Each id gets its own answer: a score, or why not (the party that holds no row
for it, or a row it cannot score).  What stops a whole round (a party that is
not linked, a ``failed`` answer, the deadline) is a :class:`RoundError` naming
the party, and every id of the round gets it.

**Versions.** The label party decides which version each round uses: a round
names it, and every party scores it with its shard of that version.
:meth:`LabelService.reload` has every feature party load the new version (and
checks each shard comes from the same training) *before* new rounds use it;
rounds under way finish with the version they started with, which every party
keeps loaded (``keep_versions``).  A feature party that links again is given the
kept versions before it takes part in a round.
"""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import logging
import threading
import time

import numpy as np

from vfl.crypto import Context, FixedPoint, PublicKey
from vfl.errors import ConfigurationError, DataError, ProtocolError, VFLError
from vfl.serving import messages, private, reasons
from vfl.serving.answers import RoundError, error
from vfl.serving.links import PeerUnavailable, Runtime, serving_coordinator
from vfl.serving.messages import OK
from vfl.serving.models import latest, load_share
from vfl.serving.rounds import Layout, row_status

log = logging.getLogger("vfl.serving")
#: Seconds a feature party has to load a model version.
LOAD_TIMEOUT = 60.0
#: Seconds :meth:`LabelService.reload` waits for the feature parties' private tables (a build of 10^6 rows of a
#: linear model takes minutes: docs/serving.md), and between two asks while a table is being built.
TABLE_TIMEOUT, TABLE_POLL = 3600.0, 0.25


class LabelService:
    """Party ``role`` (the label party of ``config``): scores batches of ids with the federation.

    Parameters
    ----------
    config : FederationConfig
    role : str
    store : vfl.serving.store.Store or None
        Its own rows by id; without one, every request carries its features inline.
    metrics : vfl.serving.metrics.Metrics, optional
    settings : ServingSettings, optional
        Its ``[serving]`` settings (default: the federation file's).
    """

    def __init__(self, config, role: str, store=None, metrics=None, settings=None):
        self.config, self.role, self.store, self.metrics = config, role, store, metrics
        self.settings = settings or config.serving_of(role)
        roster = config.roster
        self.features, self.coordinator = list(roster.features), serving_coordinator(config)
        self.shares: dict[str, object] = {}
        self.current: str | None = None
        self.layout: Layout | None = None
        self._ready: dict[str, object] = {}          # peer -> its Channel, once usable
        self.held: dict[tuple[str, str], private.HeldTable] = {}    # (feature party, version) -> its table
        self._tables: dict[tuple[str, str], str] = {}   # (feature party, version) -> how its table's fetch goes
        self._held = threading.Condition()
        self._closed = False
        self._rounds = itertools.count(1)
        self._versions = threading.Lock()
        peers = self.features + ([self.coordinator] if self.coordinator else [])
        self.runtime = Runtime(config, role, peers, self._on_link)

    # -- start, stop, status -----------------------------------------------------------------
    def start(self, version: str | None = None) -> "LabelService":
        """Load this party's shard of ``version`` (default: the last in its models folder), then link."""
        version = version or self.settings.version or latest(self.settings.models, self.role)
        share = self._own_share(version)
        with self._versions:
            self.shares[version], self.current = share, version
        self.runtime.start()
        return self

    def close(self) -> None:
        self._closed = True
        self.runtime.close()
        if self.store is not None:
            self.store.close()

    @property
    def share(self):
        return self.shares[self.current]

    def health(self) -> dict:
        """``status`` ("ok" if every party can take part in a round, else "degraded"), the version, each party."""
        parties = self.runtime.status()
        for peer, entry in parties.items():
            if entry["state"] == "up" and peer not in self._ready:
                entry.update(state="connecting", error="loading the model versions")
        share = self.share
        private_queries = self.private(share)
        if private_queries:
            for peer in self.features:
                entry = parties.get(peer)
                if entry is not None and entry["state"] == "up" and (peer, share.version) not in self.held:
                    entry.update(state="connecting", error=f"its private table: "
                                 f"{self._tables.get((peer, share.version), 'asked for')}")
        ok = all(entry["state"] == "up" for entry in parties.values())
        return {"status": "ok" if ok else "degraded", "party": self.role, "model_version": self.current,
                "model": share.kind, "queries": "private" if private_queries else "by_id", "parties": parties}

    def private(self, share) -> bool:
        """Whether rounds of ``share`` are private queries (:mod:`vfl.serving.private`).

        Raises
        ------
        ConfigurationError
            ``queries = "private"`` for a split network of two feature parties or more, which is served by id only.
        """
        why = share.by_id_only(len(self.features))
        if self.settings.queries == "private" and why:
            raise ConfigurationError(f"party {self.role}: queries = \"private\", but model version {share.version} "
                                     f"is {why}; set queries = \"auto\" or \"by_id\"")
        return self.settings.queries != "by_id" and not why

    def _own_share(self, version: str):
        share = load_share(self.settings.models, version, self.role, "label", self.config.family.name,
                           self.features)
        if self.store is not None:
            self.store.check_columns(share.columns)
        self.private(share)
        share.reason_sign = reasons.check(share, self.settings, self.features, self.role)
        return share

    # -- links -------------------------------------------------------------------------------------
    def _on_link(self, channel) -> None:
        peer = channel.peer
        if peer == self.coordinator and not self.config.family.dealer:
            key = channel.hello.get("key")
            if not isinstance(key, bytes):
                raise ProtocolError(f"{peer}'s hello carries no public key")
            settings = self.config.training
            context = Context(PublicKey.from_bytes(key), FixedPoint(settings.frac_bits))
            context.encrypt([0.0])                  # build the encryption tables before the first round
            self.layout = Layout(context, settings.packed_prediction, settings.score_bound,
                                 len(self.config.roster.data_parties))
            with self._held:                        # tables under the last key: each feature party builds anew
                stale = [(k, t) for k, t in self.held.items() if self._stale(t)]
            for (feature, version), table in stale:
                link = self._ready.get(feature)
                if link is not None:
                    threading.Thread(target=self._fetch, args=(feature, link, version, table), daemon=True,
                                     name=f"vfl-fetch-{feature}-{version}").start()
        elif peer != self.coordinator:              # (a split network's coordinator deals masks: no key, no model)
            with self._versions:
                for version in list(self.shares):
                    self._check_loaded(peer, self.shares[version], self._load_now(channel, version))
                tabled = [v for v, share in self.shares.items() if self.private(share)]
        self._ready[peer] = channel
        log.info("party %s: %s is ready", self.role, peer)
        if peer != self.coordinator:
            for version in tabled:              # a table held is used again only once the peer says it has it
                with self._held:
                    held = self.held.pop((peer, version), None)
                threading.Thread(target=self._fetch, args=(peer, channel, version, held),
                                 daemon=True, name=f"vfl-fetch-{peer}-{version}").start()
        try:
            channel.dispatch()
        finally:
            if self._ready.get(peer) is channel:
                del self._ready[peer]

    def _keep(self, version: str) -> list[str]:
        kept = [v for v in self.shares if v != version][-(self.settings.keep_versions - 1):] \
            if self.settings.keep_versions > 1 else []
        return kept + [version]

    def _load_now(self, channel, version: str):
        """Have a peer whose link just came up load ``version``: its answer (before any round runs on the link)."""
        share = self.shares[version]
        channel.send("load", "public", round=next(self._rounds), version=version, keep=",".join(self._keep(version)),
                     tables=int(self.private(share)), reasons=share.reason_sign)
        deadline = time.monotonic() + LOAD_TIMEOUT
        while time.monotonic() < deadline:
            answer = channel.recv(1.0)
            if answer is not None:
                return answer
        raise PeerUnavailable(channel.peer, f"it did not load model version {version} within {LOAD_TIMEOUT:g} s")

    def _check_loaded(self, peer: str, share, answer) -> None:
        """A ``loaded`` answer must come from the same training, and match what ``share``'s family checks of it
        (``share.take_loaded``: as many scores per id, units; the reasons' fields)."""
        if answer.name == "failed":
            raise ConfigurationError(messages.reason(answer, peer))
        if answer.name != "loaded":
            raise ProtocolError(f"{peer} answered {answer.name!r} to 'load'")
        trained_with = messages.text(answer, "trained_with", peer, 128)
        width = messages.integer(answer, "width", peer, 0, 1 << 20)
        if trained_with != share.trained_with:
            raise DataError(f"party {peer}'s shard of model version {share.version} comes from a training with "
                            f"other settings than party {self.role}'s; use the shards of one training run")
        share.take_loaded(peer, answer, width, self.role)     # what its family adds: widths, reasons' fields

    # -- private tables -------------------------------------------------------------------------------
    def _fetch(self, peer: str, channel, version: str, held: private.HeldTable | None) -> None:
        """Fetch ``peer``'s newest table of ``version`` and hold it; or, if its newest is ``held``, hold that."""
        key, after = (peer, version), held.ident if held is not None else None
        try:
            while not self._closed and not channel.closed:
                reply = self._table_part(channel, version, after, 0)
                if reply.name == "table_pending":
                    percent = messages.integer(reply, "percent", peer, 0, 100)
                    if held is not None and reply.fields.get("reason"):
                        # its rebuild failed; the table it still serves is the one held: rounds go on with it
                        self._hold(key, held)
                        self._note(key, f"failed: {messages.reason(reply, peer)} (rounds go on with the table "
                                        "held before)")
                        log.warning("party %s: %s's private table of model version %s: %s", self.role, peer,
                                    version, messages.reason(reply, peer))
                        return
                    self._note(key, f"being built ({percent}%)")
                    # still building; or done, but the peer has not the coordinator's new key yet: it will build
                    if reply.fields.get("building") or (held is not None and self._stale(held)):
                        time.sleep(TABLE_POLL)
                        continue
                    return self._hold(key, held)             # the one held is its newest
                table = self._download(peer, channel, version, after, reply)
                self._hold(key, table)
                log.info("party %s: holds %s's private table %s of model version %s (%d entries, %.1f MB)",
                         self.role, peer, private.fingerprint(table), version, table.count,
                         len(table.entries) / 1e6)
                return
        except (VFLError, cf.TimeoutError) as exc:
            self._note(key, f"failed: {exc}")
            log.warning("party %s: %s's private table of model version %s: %s", self.role, peer, version, exc)

    def _hold(self, key: tuple, table: private.HeldTable | None) -> None:
        with self._held:
            if table is not None:
                self.held[key] = table
            self._tables[key] = "held"
            self._held.notify_all()

    def _stale(self, table: private.HeldTable) -> bool:
        """A linear model's table encrypted under a key of the coordinator that is not its key now."""
        layout = self.layout
        return bool(table.key_fingerprint) and layout is not None and \
            table.key_fingerprint != layout.context.public_key.fingerprint

    def _note(self, key: tuple, state: str) -> None:
        with self._held:
            self._tables[key] = state
            self._held.notify_all()

    def _table_part(self, channel, version: str, after: bytes | None, offset: int):
        round_id = next(self._rounds)
        try:
            reply = channel.request(round_id, "table", "public", version=version, after=after or b"",
                                    offset=offset).result(LOAD_TIMEOUT)
        finally:
            channel.forget(round_id)
        if reply.name == "failed":
            raise ConfigurationError(messages.reason(reply, channel.peer))
        if reply.name not in ("table_pending", "table_part"):
            raise ProtocolError(f"{channel.peer} answered {reply.name!r} to 'table'")
        return reply

    def _download(self, peer: str, channel, version: str, after, first) -> private.HeldTable:
        """The whole table whose first chunk is ``first``: every chunk asked for by offset, then checked."""
        ident = first.fields.get("table")
        if not isinstance(ident, bytes) or len(ident) != private.IDENT_BYTES:
            raise ProtocolError(f"{peer} sent a table without a {private.IDENT_BYTES}-byte name")
        count = messages.integer(first, "count", peer, 1, 1 << 32)
        payload_bytes = messages.integer(first, "payload_bytes", peer, 1, 1 << 24)
        kind, key = messages.text(first, "model", peer, 16), messages.text(first, "key", peer, 64)
        entry_bytes = private.entry_bytes(payload_bytes)
        chunks, have, reply = [], 0, first
        while True:
            data = reply.fields.get("entries")
            if reply.fields.get("table") != ident or not isinstance(data, bytes) or not data or \
                    len(data) % entry_bytes or reply.fields.get("offset") != have:
                raise ProtocolError(f"{peer} sent a chunk of its table that does not follow the last")
            chunks.append(data)
            have += len(data) // entry_bytes
            self._note((peer, version), f"being fetched ({100 * have // count}%)")
            if have >= count:
                break
            reply = self._table_part(channel, version, after, have)
            if reply.name != "table_part":
                raise ProtocolError(f"{peer} stopped sending its table half-way")
        return private.HeldTable(peer, version, ident, kind, payload_bytes, count, b"".join(chunks), key)

    def _await_tables(self, version: str, before: dict) -> None:
        """Wait until every feature party's table of ``version`` newer than ``before`` is held (a reload)."""
        deadline = time.monotonic() + TABLE_TIMEOUT
        with self._held:
            for peer in self.features:
                key = (peer, version)
                fresh = lambda: key in self.held and self.held[key].ident != before.get(peer) or \
                    self._tables.get(key, "").startswith("failed")
                if not self._held.wait_for(fresh, max(0.0, deadline - time.monotonic())):
                    raise RoundError(f"party {peer}'s private table of model version {version} did not come within "
                                     f"{TABLE_TIMEOUT:g} s", peer, 504, "deadline_exceeded")
                state = self._tables.get(key, "")
                if state.startswith("failed"):
                    raise RoundError(f"cannot switch to model version {version}: party {peer}'s private table {state}",
                                     peer, 503, "party_failed")

    # -- versions ------------------------------------------------------------------------------------
    def reload(self, version: str) -> dict:
        """Switch to ``version`` once every party has loaded it; rounds under way finish on the old one.

        With private queries, every feature party (re)builds its table of ``version``
        from its store as it is now, and the label party switches once it holds them
        all: a reload of the version in use refreshes the tables.

        Raises
        ------
        RoundError
            A feature party is unavailable, or could not load the version (the message names it).
        ConfigurationError, DataError
            This party has no valid shard of ``version``.
        """
        with self._versions:
            previous = self.current
            share = self._own_share(version)
            keep = self._keep(version)
            tables = 2 if self.private(share) else 0
            asked, channels = {}, {}
            for peer in self.features:
                channel = channels[peer] = self._ready.get(peer)
                if channel is None:
                    raise RoundError(f"cannot switch to model version {version}: party {peer} is unavailable",
                                     peer)
                asked[peer] = channel.request(next(self._rounds), "load", "public", version=version,
                                              keep=",".join(keep), tables=tables, reasons=share.reason_sign)
            for peer, future in asked.items():
                try:
                    self._check_loaded(peer, share, future.result(LOAD_TIMEOUT))
                except cf.TimeoutError:
                    raise RoundError(f"party {peer} did not load model version {version} within "
                                     f"{LOAD_TIMEOUT:g} s", peer, 504, "deadline_exceeded") from None
                except PeerUnavailable as exc:
                    raise RoundError(str(exc), peer) from None
                except (ConfigurationError, DataError) as exc:
                    raise RoundError(f"cannot switch to model version {version}: {exc}", peer, 409,
                                     "version_refused") from None
            if tables:
                held = {peer: self.held.get((peer, version)) for peer in self.features}
                before = {peer: getattr(held[peer], "ident", None) for peer in self.features}
                for peer in self.features:
                    self._note((peer, version), "asked for")
                    threading.Thread(target=self._fetch, args=(peer, channels[peer], version, held[peer]),
                                     daemon=True, name=f"vfl-fetch-{peer}-{version}").start()
                self._await_tables(version, before)
            self.shares[version], self.current = share, version
            for old in [v for v in self.shares if v not in keep]:
                del self.shares[old]
            with self._held:
                for key in [k for k in self.held if k[1] not in keep]:
                    del self.held[key]
        log.info("party %s: model version %s (was %s)", self.role, version, previous)
        return {"model_version": version, "previous": previous}

    # -- rounds ----------------------------------------------------------------------------------------
    def score(self, ids: list[str], inline: list, deadline: float) -> tuple[str, list[dict]]:
        """Score ``ids`` in one round (``inline[i]``: id ``i``'s own features as ``{column: value}``, or None).

        ``deadline`` is a ``time.monotonic()`` instant.  Returns the version used and one
        answer per id: ``{"id", "score", ...}`` or ``{"id", "error": {"code", "party", "message"}}``.

        Raises
        ------
        RoundError
            Every id of the round failed for the same reason (a party, the deadline).
        """
        share = self.share
        started = time.perf_counter()
        values, status = self._own_rows(share, ids, inline)
        answers: list[dict | None] = [None] * len(ids)
        for i in np.flatnonzero(status != OK):
            answers[i] = error(ids[i], "own", self.role, status[i])
        try:
            self.config.family.module("scorer").score(self, share, ids, values, status, deadline, answers)
        except ProtocolError as exc:            # a peer's answer broke the protocol: named in the message
            log.warning("party %s: %s", self.role, exc)
            raise RoundError(str(exc), getattr(exc, "party", None), 502, "protocol_error") from None
        if self.metrics is not None:
            self.metrics.round(share.kind, len(ids), time.perf_counter() - started)
        return share.version, answers

    def _own_rows(self, share, ids, inline) -> tuple[np.ndarray, np.ndarray]:
        """This party's rows of ``ids``: inline where given, else from its store; a status per id."""
        n, columns = len(ids), share.columns
        values = np.full((n, len(columns)), np.nan)
        found = np.zeros(n, dtype=bool)
        given = [i for i in range(n) if inline[i] is not None]
        for i in given:
            row = inline[i]
            if set(row) == set(columns):
                values[i] = [np.nan if row[c] is None else row[c] for c in columns]
                found[i] = True
        mismatched = [i for i in given if not found[i]]
        looked = [i for i in range(n) if inline[i] is None]
        if looked and self.store is not None:
            rows, hits = self.store.lookup([ids[i] for i in looked], columns)
            values[looked], found[looked] = rows, hits
        status = row_status(values, found, complete=share.complete)
        status[mismatched] = -1
        return values, status

    # -- what each family's round uses (vfl.serving.scorers) --------------------------------------------
    def next_round(self) -> int:
        """A fresh round id."""
        return next(self._rounds)

    def require(self, peer: str, ok: bool = True) -> None:
        """Refuse the round (:class:`RoundError`) unless ``peer`` is linked and ready, and ``ok``."""
        if not ok or peer not in self._ready:
            raise self._unavailable(peer)

    def query_tables(self, share, asked: list, chosen: list, deadline: float, round_id: int) -> dict:
        """A private round's query to each of ``asked``: blinded points only; per party, its ``(status, bodies)``
        of the ``chosen`` ids from its table (:func:`vfl.serving.private.open_payloads`)."""
        tables, blinds, requests = {}, {}, {}
        for peer in asked:
            table = tables[peer] = self.held.get((peer, share.version))
            if table is None:
                state = self._tables.get((peer, share.version), "asked for")
                raise RoundError(f"party {peer}'s private table of model version {share.version} is not here yet "
                                 f"({state})", peer, 503, "table_not_ready")
            if share.keyed and table.key_fingerprint != self.layout.context.public_key.fingerprint:
                raise RoundError(f"party {peer}'s private table was built under another key of the coordinator "
                                 f"(it restarted); {peer} builds it again", peer, 503, "table_not_ready")
            points, blinds[peer] = private.blind(table, chosen)
            requests[peer] = ("evaluate", "masked", {"table": table.ident, "points": points})
        replies = self.ask(round_id, requests, deadline)
        return {peer: private.open_payloads(tables[peer], chosen, replies[peer].fields.get("points"), blinds[peer],
                                            peer) for peer in asked}

    def ask(self, round_id: int, requests: dict, deadline: float) -> dict:
        """Send every peer its request for this round; their answers, or a :class:`RoundError`."""
        missing = [peer for peer in requests if peer not in self._ready]
        if missing:
            raise self._unavailable(missing[0])
        futures = {}
        for peer, (name, kind, fields) in requests.items():
            channel = self._ready.get(peer)
            if channel is None:             # its link failed just now
                future = cf.Future()
                future.set_exception(PeerUnavailable(peer, "its link failed"))
            else:
                future = channel.request(round_id, name, kind, **fields)
            futures[peer] = (channel, future)
        done, late = cf.wait([f for _, f in futures.values()], timeout=max(0.0, deadline - time.monotonic()))
        for channel, _ in futures.values():
            if channel is not None:
                channel.forget(round_id)
        if late:
            waited = [p for p, (_, f) in futures.items() if f in late]
            raise RoundError(f"party {', '.join(waited)} did not answer within the request's deadline", waited[0],
                             504, "deadline_exceeded")
        answers = {}
        for peer, (_, future) in futures.items():
            try:
                message = future.result()
            except PeerUnavailable as exc:
                raise RoundError(str(exc), peer) from None
            if message.name == "failed":
                raise RoundError(messages.reason(message, peer), peer, 503, "party_failed")
            answers[peer] = message
        return answers

    def _unavailable(self, peer: str) -> RoundError:
        entry = self.runtime.status().get(peer, {})
        why = entry.get("error") or "it is loading the model versions"
        return RoundError(f"party {peer} is unavailable: {why}", peer)
