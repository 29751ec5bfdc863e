"""Trees' round: each feature party that owns splits sends, per id, the leaves its splits allow (or its private
table's sealed masks); the label party intersects them with its own splits and sums the leaves; with reasons, the
parties' Shapley values from the same masks (:func:`reasons_of`)."""

from __future__ import annotations

import numpy as np

from vfl.deploy.report import plain
from vfl.deploy.shards import trees as tree_shards
from vfl.errors import DataError
from vfl.protocols.trees.inference import mask_widths, raw_scores, tree_owners
from vfl.protocols.trees.training import bits, ints, unbits
from vfl.runs import explained
from vfl.runs.trees import check_explainable, party_values, released_bits
from vfl.serving import messages, private, reasons
from vfl.serving.answers import classified, outcome, theirs
from vfl.deploy.shards.trees import read_shard
from vfl.serving.messages import OK, UNKNOWN, pack_ids


#: The round request a tree party answers, and what a feature party of another model says to it.
REQUEST, REFUSED = "leaves", "asked for leaf masks of a linear model"


class TreeShare:
    """One party's shard of gradient-boosted trees.

    A feature party's ``masks(x, trees)`` gives, per row, the leaves its own splits
    allow in each tree of ``trees``, side by side; the label party's ``raw(x, masks)``
    adds the leaf values every party's masks leave (its own splits' included).  What every
    share has: :mod:`vfl.serving.scorers`.
    """

    kind = "trees"
    complete = False
    keyed = False
    request = "leaves"
    inline_null = True
    noun = "tree ensemble"
    own_reasons = False
    #: the label party's reasons' adverse side (0: none asked; :mod:`vfl.serving.reasons`)
    reason_sign = 0.0

    def __init__(self, shard: dict, version: str, features=()):
        self.version = version
        self.role = shard["role"]
        self.columns = list(shard["columns"])
        self.trained_with = shard["trained_with"]
        self.party = tree_shards.shard_party(shard, np.empty((0, len(self.columns))), shard["party"])
        if self.role == "feature":
            self.trees = [int(t["index"]) for t in shard["trees"]]
            #: what its ``loaded`` answer says: its trees
            self.width = len(self.trees)
            return
        self.classes = [plain(c) for c in self.party.classes] if self.party.classes is not None else None
        self.feature_parties = list(shard["data_parties"][:-1])
        if list(features) and list(features) != self.feature_parties:
            raise DataError(f"version {version}: the trees were trained with the feature parties "
                            f"{self.feature_parties}, but the federation names {list(features)}")
        self.owners = tree_owners(self.party, self.feature_parties)
        self.widths = mask_widths(self.party, self.owners)

    def codes(self, x: np.ndarray) -> np.ndarray:
        return self.party.bin_new(x)

    def masks(self, x: np.ndarray, trees: list[int]) -> np.ndarray:
        return self.party.leaf_masks(trees, self.codes(x))

    def sides(self, x: np.ndarray) -> np.ndarray:
        """A feature party: per row, the side of each of its splits (True: left), what its masks are made of."""
        return self.party.split_bits(self.codes(x))

    def masks_of(self, sides: np.ndarray, trees: list[int]) -> np.ndarray:
        """A feature party: the masks of ``trees`` made of ``sides`` (as :meth:`sides`, perhaps randomized)."""
        return self.party.masks_from_bits(trees, sides)

    def raw(self, x: np.ndarray, masks: dict[str, np.ndarray]) -> np.ndarray:
        return raw_scores(self.party, self.codes(x), self.owners, masks)

    # -- the feature party ----------------------------------------------------------------------------------------
    def check_release(self, service, version: str, consent: dict, sign: float, tables: int) -> None:
        """At ``load``: the feature party's release check of the sides of its splits (what its leaf masks are made
        of) over every row of its store, missing values included, recorded in its ledger; with DP, on the randomized
        sides."""
        ids, values = service.store.rows(self.columns)
        released_bits(service.release, service.label, self.party, values, self.codes(values), ids=list(ids),
                      version=version, what=f"the side of each of its splits per row (its leaf masks) in served "
                                            f"version {version}")

    def answer(self, service, message) -> tuple:
        """Its answer to a ``leaves`` request: a status per id and, per id and tree of those asked, the leaves its
        own splits allow (with DP, of its randomized sides); every leaf for an id it does not hold."""
        trees = ints(message, "trees", 0, 1 << 30).tolist()
        values, status, ids = service.rows(message, self)
        values[status != OK] = np.nan                       # unknown rows: every leaf allowed, ignored by the label
        sides = service.noised(self.version, self.sides(values), ids, status, bits=True)
        masks = self.masks_of(sides, trees)
        masks[status == UNKNOWN] = True
        return "leaf_masks", "plaintext", dict(bits(masks.ravel()), status=status)

    def loaded_fields(self, role: str, sign: float) -> dict:
        """Its ``loaded`` answer adds nothing."""
        return {}

    def payloads(self, values: np.ndarray, status: np.ndarray, layout, frac_bits: int, noise=None) -> np.ndarray:
        """Per row: its status byte and the leaves its own splits allow in each of its trees (one bit per leaf);
        ``noise(sides, status, bits=True)``: the party's release noise on the sides of its splits (DP randomized
        response), the masks made of what it returns."""
        if noise is None:
            masks = self.masks(values, self.trees)
        else:
            masks = self.masks_of(noise(self.sides(values), status, bits=True), self.trees)
        bits = np.packbits(masks, axis=1)
        out = private.bodies(status, bits.shape[1])
        out[:, 1:] = bits
        return out

    # -- the label party ------------------------------------------------------------------------------------------
    def by_id_only(self, n_features: int) -> str:
        """Its rounds may always be private queries."""
        return ""

    def take_loaded(self, peer: str, answer, width: int, role: str) -> None:
        """A feature party's ``loaded`` answer: nothing more to take (its trees are the label party's shard's)."""

    def unexplained(self, n_features: int) -> str:
        """Nothing refuses it outright (:meth:`check_explainable` says what does)."""
        return ""

    def check_explainable(self) -> None:
        """Raise unless its trees give the parties' Shapley values (one per class, saved with their cover)."""
        check_explainable(self.party, self.feature_parties)

    def outcome(self, z: np.ndarray) -> dict:
        """One id's answer from its raw scores; several classes: their softmax."""
        return classified(z, self.classes)


def load_share(path, version: str, party: str, kind: str, features=()) -> TreeShare:
    """Party ``party``'s share of ``version`` of a tree ensemble, from its shard at ``path`` (``kind``: its role),
    checked; ``features``: the federation's feature parties, which the label party's trees must name."""
    return TreeShare(read_shard(path, party, kind), version, features)


def score(service, share, ids, values, status, deadline, answers) -> None:
    """Score the round's ids (see :mod:`vfl.serving.scorers`)."""
    go = np.flatnonzero(status == OK)
    if not len(go):
        return
    chosen, asked = [ids[i] for i in go], [k for k in service.features if share.owners[k]]
    round_id = service.next_round()
    masks = {k: np.ones((len(go), share.widths[k]), dtype=bool) for k in share.feature_parties}
    if service.private(share):
        opened = service.query_tables(share, asked, chosen, deadline, round_id)
        their = {k: status for k, (status, _) in opened.items()}
        for k, (status, bodies) in opened.items():
            masks[k] = leaf_masks(status, bodies, share.widths[k])
    else:
        replies = service.ask(round_id, {k: ("leaves", "public", {
            "version": share.version, "ids": pack_ids(chosen),
            "trees": np.asarray(share.owners[k], dtype=np.int64)}) for k in asked}, deadline)
        their = {k: messages.statuses(replies[k], k, len(go)) for k in asked}
        for k in asked:
            masks[k] = unbits(replies[k], len(go) * share.widths[k]).reshape(len(go), share.widths[k])
    scored = np.flatnonzero(np.all([s == OK for s in their.values()], axis=0)) if their else np.arange(len(go))
    masks = {k: m[scored] for k, m in masks.items()}
    raw = share.raw(values[go][scored], masks) if len(scored) else None
    given = {}
    if share.reason_sign and len(scored):         # the same masks: the parties' Shapley values, no message more
        given = dict(zip(scored.tolist(), reasons_of(share, share.codes(values[go][scored]), masks,
                                                     service.settings.reasons)))
    at = {int(j): r for r, j in enumerate(scored)}
    for j, i in enumerate(go):
        answers[i] = theirs(ids[i], their, j) or {"id": ids[i], **outcome(share, raw[at[j]]),
                                                   **({"reasons": given[j]} if share.reason_sign else {})}


# -- its reasons (vfl.serving.reasons), and the leaf masks of its private tables' payloads -------------------------

def reasons_of(share, codes: np.ndarray, masks: dict, k: int) -> list[list[str]]:
    """The label party's reasons of a trees round's scored ids: the parties' Shapley values from its own splits'
    bin ``codes`` and the feature parties' leaf ``masks``."""
    values = party_values(share.party, codes, share.owners, masks, share.feature_parties)
    return reasons.ranked(explained.party_level(values), k, share.reason_sign)


def leaf_masks(status: np.ndarray, bodies: list, bits: int) -> np.ndarray:
    """A feature party's leaf masks of the round's ids from the payloads (every leaf allowed where it has none)."""
    out = np.ones((len(status), bits), dtype=bool)
    for i in np.flatnonzero(status == OK):
        out[i] = np.unpackbits(np.frombuffer(bodies[i], dtype=np.uint8))[:bits].astype(bool)
    return out
