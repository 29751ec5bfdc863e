"""The coordinator's service (linear models): a key pair for as long as it runs, and masked decryptions.

It makes its Paillier key pair at start and gives the public key to every data
party in its hello; the private key never leaves its process.  A restart makes
a new pair: the parties take the new key as they link again, and the label
party's rounds name the key they use, so no feature party encrypts under a key
the coordinator no longer holds.

The only request is the label party's ``decrypt``: the sum of every party's
partial scores plus the label party's fresh mask, in the public packed layout
(checked before anything is decrypted).  What it decrypts is ``Z + R mod n``,
``R`` uniform over Z_n and fresh for every ciphertext (packed or not): a uniform
residue; it never learns a score.
"""

from __future__ import annotations

import logging

from vfl.crypto import FixedPoint
from vfl.errors import ConfigurationError, ProtocolError
from vfl.parties import Coordinator
from vfl.serving.feature import MAX_ROUND_IDS
from vfl.serving.links import Runtime
from vfl.serving.rounds import Layout, decrypted

log = logging.getLogger("vfl.serving")


class CoordinatorService:
    """Party ``role`` of ``config``: the coordinator of a linear model's serving federation."""

    def __init__(self, config, role: str):
        if config.boosting:
            raise ConfigurationError(f"party {role}: gradient boosting has no coordinator (the label party holds "
                                     "the key pair): nothing to serve")
        self.config, self.role = config, role
        settings = config.training
        self.coordinator = Coordinator(settings.key_bits, settings.insecure, FixedPoint(settings.frac_bits))
        self.key = self.coordinator.public_key_bytes()
        context = self.coordinator.context
        self.layout = Layout(context, settings.packed_prediction, settings.score_bound,
                             len(config.roster.data_parties))
        self.label = config.roster.label
        peers = [p for p in config.roster.everyone if p != role]
        self.runtime = Runtime(config, role, peers, self._on_link, hello_fields=lambda peer: {"key": self.key})
        self.decrypted = 0

    def start(self) -> "CoordinatorService":
        self.runtime.start()
        return self

    def close(self) -> None:
        self.runtime.close()

    def _on_link(self, channel) -> None:
        while True:
            message = channel.recv(1.0)
            if message is None:
                continue
            round_id = message.fields.get("round")
            if channel.peer != self.label or message.name != "decrypt" or not isinstance(round_id, int):
                raise ProtocolError(f"{channel.peer} sent {message.name!r}; the coordinator decrypts only the label "
                                    "party's masked sums")
            try:
                fields = decrypted(self.layout, self.coordinator.context, message, channel.peer,
                                   MAX_ROUND_IDS * 1000)
            except ProtocolError as exc:
                log.warning("party %s: %s", self.role, exc)
                channel.send("failed", "public", round=round_id, reason=f"party {self.role}: {exc}")
                continue
            channel.send("decrypted", "masked", round=round_id, **fields)
            self.decrypted += 1
