"""What each message carries, in one table per family, and the messages every run shares.

Each family's package declares the messages its programs send, next to them
(:mod:`vfl.protocols.linear.messages`, :mod:`vfl.protocols.trees.messages`,
:mod:`vfl.protocols.credit.messages`, :mod:`vfl.protocols.mlp.messages`; the private set
intersection in :mod:`vfl.protocols.psi` and :mod:`vfl.protocols.psi_secretflow`).  A table maps
``(sender's role, message name)`` to a one-line description, in the notation of Yang et al. 2019
(``k``: one feature party); an entry ``(role, name, task)`` overrides it in that task (``"predict"``,
``"align"``).  Roles are ``"feature"``, ``"label"`` and ``"coordinator"``.  The terminal narration and
the board read these tables (:func:`vfl.deploy.narration.description`); a message missing from its
family's table is a gap the tests catch, not a name shown as its own description.

:data:`MESSAGES` here: what every run sends around its protocol, the session's ``hello`` and
``ids_digest`` (:mod:`vfl.deploy.session`, which cannot hold them: the narration it imports reads this
table) and an ``abort`` (:class:`vfl.transport.Endpoint`).
"""

from __future__ import annotations

ROLES = ("feature", "label", "coordinator")

_DATA_HELLO = ("settings fingerprint and the shared settings; to the label party also its row and column counts "
               "and a fresh salt for the row-id digest")

#: The messages of every run, whatever its family.
MESSAGES = {
    ("feature", "hello"): _DATA_HELLO,
    ("feature", "hello", "predict"): "settings fingerprint and the shared settings; to the label party also its "
                                     "row count, its shard's training fingerprint and a fresh salt for the row-id "
                                     "digest",
    ("label", "hello"): "settings fingerprint, the shared settings and the run's id; to each feature party also its "
                        "row and column counts and a fresh salt for the row-id digest",
    ("label", "hello", "predict"): "settings fingerprint and the shared settings; to each feature party also its "
                                   "row count, its shard's training fingerprint and a fresh salt for the row-id digest",
    ("coordinator", "hello"): "settings fingerprint and the shared settings only (it holds no data)",
    ("feature", "ids_digest"): "digest of its sorted row ids under both parties' salts (to the label party)",
    ("label", "ids_digest"): "digest of its sorted row ids under both parties' salts (to each feature party)",
    **{(role, "hello", "align"): "settings fingerprint and the shared settings" for role in ROLES},
    **{(role, "abort"): "this party stopped: who stopped first, the category of the cause, and why" for role in ROLES},
}


def lookup(table: dict, role: str, name: str, task: str = "train") -> str | None:
    """``table``'s description of ``name`` sent by ``role`` in a run of ``task``, or ``None``."""
    return table.get((role, name, task)) or table.get((role, name))
