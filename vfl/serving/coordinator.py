"""The coordinator's service: masked decryptions (linear models), or the masks of a split network's rounds.

**Linear models.** It makes its Paillier key pair at start and gives the public
key to every data party in its hello; the private key never leaves its process.
With a work directory (``vfl serve --workdir``, ``vfl-C`` by default) it keeps the
pair in ``serving_key.json`` there, readable by its owner only (as its TLS key
beside it), so that a restart keeps the key and the feature parties' private
tables, encrypted under it, stay valid; delete the file to rotate the key.  A new
pair (a rotation, or no work directory): the parties take the new key as they
link again, every private table is built again under it, and the label party's
rounds name the key they use, so no feature party encrypts under a key the
coordinator no longer holds.

The only request is the label party's ``decrypt``: the sum of every party's
partial scores plus the label party's fresh mask, in the public packed layout
(checked before anything is decrypted).  What it decrypts is ``Z + R mod n``,
``R`` uniform over Z_n and fresh for every ciphertext (packed or not): a uniform
residue; it never learns a score.

**Split networks** (two feature parties or more).  The only request is the
label party's ``deal``: a round's count of ids and the interactive layer's width,
and a fresh random token naming the round.  It sends every feature party a mask
(``part_mask``: uniform ring elements, the last party's making the sum zero,
:func:`vfl.crypto.ring.zero_sum`) tagged with the token, and answers ``dealt``.
It learns the count of ids of each round, nothing else: no id, no part.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from pathlib import Path

from vfl.crypto import Context, PrivateKey, PublicKey, ring
from vfl.deploy.jsonfile import open_private
from vfl.errors import ConfigurationError, ProtocolError, VFLError
from vfl.parties import Coordinator
from vfl.serving.feature import MAX_MASK_VALUES, MAX_ROUND_IDS
from vfl.serving.links import Runtime, serving_coordinator
from vfl.serving.messages import integer, token
from vfl.serving.rounds import Layout, decrypted

log = logging.getLogger("vfl.serving")
#: Where a coordinator with a work directory keeps its serving key pair.
KEY_FILE = "serving_key.json"
#: Seconds a split network's deal waits for a feature party's link that is not up yet (a coordinator just
#: started: the label party's link can be ready before the feature parties' are).
LINK_WAIT = 5.0


class CoordinatorService:
    """Party ``role`` of ``config``: the coordinator of a linear model's, or a split network's, serving federation."""

    def __init__(self, config, role: str, workdir=None):
        if serving_coordinator(config) is None:
            why = (f"{config.family.title} has no coordinator (the label party holds the key pair)"
                   if not config.family.coordinator else
                   f"{config.family.title} with one feature party is served without a coordinator (no masks to deal)")
            raise ConfigurationError(f"party {role}: {why}: nothing to serve")
        self.config, self.role, self.mlp = config, role, config.family.dealer
        settings = config.training
        self.label, self.features = config.roster.label, list(config.roster.features)
        peers = [p for p in config.roster.everyone if p != role]
        self._links: dict[str, object] = {}         # feature party -> its channel (the masks go there)
        self._lock = threading.Condition()
        self.decrypted = 0
        if self.mlp:
            self.runtime = Runtime(config, role, peers, self._on_link)
            return
        self.coordinator = Coordinator.for_settings(settings)
        kept = _kept_key(Path(workdir) / KEY_FILE, settings.key_bits) if workdir is not None else None
        if kept is not None:
            public, private = kept
            self.coordinator.context = Context(public, self.coordinator.precision, private_key=private)
        self.key = self.coordinator.public_key_bytes()
        if workdir is not None and kept is None:
            _keep_key(Path(workdir) / KEY_FILE, self.coordinator.context)
        context = self.coordinator.context
        self.layout = Layout(context, settings.packed_prediction, settings.score_bound,
                             len(config.roster.data_parties))
        self.runtime = Runtime(config, role, peers, self._on_link, hello_fields=lambda peer: {"key": self.key})

    def start(self) -> "CoordinatorService":
        self.runtime.start()
        return self

    def close(self) -> None:
        self.runtime.close()

    def _on_link(self, channel) -> None:
        if channel.peer != self.label:
            return self._hold(channel)
        asked = "deal" if self.mlp else "decrypt"
        while True:
            message = channel.recv(1.0)
            if message is None:
                continue
            round_id = message.fields.get("round")
            if message.name != asked or not isinstance(round_id, int):
                raise ProtocolError(f"{channel.peer} sent {message.name!r}; the coordinator answers only the label "
                                    f"party's {asked!r}")
            try:
                name, kind, fields = self._deal(message) if self.mlp else self._decrypt(message)
            except (ProtocolError, ConfigurationError) as exc:
                log.warning("party %s: %s", self.role, exc)
                channel.send("failed", "public", round=round_id, reason=f"party {self.role}: {exc}")
                continue
            channel.send(name, kind, round=round_id, **fields)

    def _hold(self, channel) -> None:
        """A feature party's link: it sends nothing; a split network's masks go out on it while it lasts."""
        with self._lock:
            self._links[channel.peer] = channel
            self._lock.notify_all()
        try:
            while True:
                message = channel.recv(1.0)
                if message is not None:
                    raise ProtocolError(f"{channel.peer} sent {message.name!r}; a feature party sends the "
                                        "coordinator nothing")
        finally:
            with self._lock:
                if self._links.get(channel.peer) is channel:
                    del self._links[channel.peer]

    def _decrypt(self, message):
        fields = decrypted(self.layout, self.coordinator.context, message, self.label, MAX_ROUND_IDS * 1000)
        self.decrypted += 1
        return "decrypted", "masked", fields

    def _deal(self, message):
        """Masks summing to zero for one round of a split network, one to each feature party; ``dealt``."""
        rows = integer(message, "rows", self.label, 1, MAX_ROUND_IDS)
        units = integer(message, "units", self.label, 1, MAX_MASK_VALUES // rows)
        tag = token(message, self.label)
        with self._lock:
            self._lock.wait_for(lambda: all(k in self._links for k in self.features), LINK_WAIT)
            links = {k: self._links.get(k) for k in self.features}
        missing = [k for k, link in links.items() if link is None]
        if missing:
            raise ConfigurationError(f"it is not linked to party {missing[0]}, so it cannot deal its mask")
        for k, mask in zip(self.features, ring.zero_sum(len(self.features), (rows, units))):
            try:
                links[k].send("part_mask", "masked", token=tag, values=ring.to_bytes(mask))
            except VFLError as exc:
                raise ConfigurationError(f"its link to party {k} failed as it sent its mask ({exc})") from None
        return "dealt", "public", {}


def _kept_key(path: Path, key_bits: int):
    """The key pair kept at ``path``, or None if there is none or it is not of ``key_bits`` bits (then a new one)."""
    if not path.is_file():
        return None
    try:
        kept = json.loads(path.read_text())
        n, p, q = (int(kept[k]) for k in ("n", "p", "q"))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigurationError(f"{path} is not a vfl serving key ({exc}); delete it to make a new key pair") from None
    if kept.get("format") != "vfl-serving-key/1" or p * q != n:
        raise ConfigurationError(f"{path} is not a vfl serving key; delete it to make a new key pair")
    if n.bit_length() != key_bits:
        log.warning("the key pair in %s has %d bits, the settings ask for %d: making a new pair", path,
                    n.bit_length(), key_bits)
        return None
    public = PublicKey(n)
    return public, PrivateKey(public, p, q)


def _keep_key(path: Path, context) -> None:
    """Write the key pair to ``path``, readable by its owner only (written aside, then renamed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    secret = context.private_key
    text = json.dumps({"format": "vfl-serving-key/1", "n": str(int(context.public_key.n)), "p": str(int(secret.p)),
                       "q": str(int(secret.q))})
    aside = path.with_suffix(".tmp")
    with open_private(aside) as f:
        f.write(text)
    os.replace(aside, path)
