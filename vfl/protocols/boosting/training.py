"""Training: SecureBoost (Cheng et al. 2019) — one program per role, the label party holding the key.

Read the two programs side by side with the table (every feature party does
what party k does; feature parties never talk to each other)::

    Step  Feature party k                                   Label party
    1     -                                                 make a key pair; public key -> every k
    2     last completed iteration -> label                 resume after the least; validation seed -> every k
    per boosting iteration t:
    3     -                                                 g, h of every training row, quantized; unless t is one of
                                                            the first label_party_trees: [[g, h]] per row -> every k
    per tree (one per class for the multinomial loss), per round:
    4     <- the new nodes and which to evaluate            standard: each new node's rows;
                                                            hidden membership: [[g, h]] per row in its node's slot
    5     per node and bin [[sum g, sum h]]; the left sums  decrypt the sums, its own columns' in the clear; gains;
          of its candidates, shuffled, combined, fresh -> label   each node's best split; the nodes to split now
    6     <- "node v: your candidate j"; the rows going     grows the tree; at the end the leaf values, and the
          left and the column index -> label                tree's shape -> every k
    end of iteration:
    7     its leaf masks of the validation rows -> label    the validation score; stop? -> every k

What each party learns is in docs/trees.md.  In short: the label party learns
every node's sums for every candidate of every party (candidates as "party k,
number j"), which rows go left at every split, the column index of each
feature party's split; a feature party learns, in the standard mode, the rows
of every node (as in FATE), in the hidden-membership mode no row's node; it
learns the shape of each tree and its own splits, never a gradient, label or
leaf value.

Every role program takes an :class:`~vfl.transport.Endpoint`, its party, the
shared :class:`~vfl.protocols.boosting.settings.BoostingSettings` and the
:class:`~vfl.protocols.roster.Roster` (no coordinator).  ``checkpoints`` maps
a completed iteration to the party's saved state; ``on_iteration(iteration,
state)`` is called after every completed iteration.
"""

from __future__ import annotations

import secrets
from typing import Callable, Mapping

import numpy as np

from vfl.crypto import EncryptedVector
from vfl.errors import DataError, ProtocolError
from vfl.parties.boosting import TreeGrower, best, gains, layout, validation_score
from vfl.parties.boosting.feature_party import BoostingFeatureParty
from vfl.parties.boosting.label_party import BoostingLabelParty
from vfl.parties.wire import pack_vector, unpack_vector
from vfl.protocols.boosting.settings import BoostingSettings, should_stop
from vfl.protocols.roster import Roster
from vfl.protocols.settings import validation_rows
from vfl.transport import Endpoint

Checkpoints = Mapping[int, dict]
OnIteration = Callable[[int, dict], None]

#: Most training iterations, trees per iteration, and nodes per tree a peer's message may announce.
MAX_ROWS = 1 << 31


# -- message helpers ------------------------------------------------------------------------
def bits(values) -> dict:
    """A bool vector as message fields (packed bytes and the count)."""
    values = np.asarray(values, dtype=bool)
    return {"bits": np.packbits(values).tobytes(), "count": int(values.size)}


def unbits(message, count: int | None = None) -> np.ndarray:
    data, n = message["bits"], message["count"]
    if not isinstance(data, bytes) or not isinstance(n, int) or isinstance(n, bool) or not 0 <= n <= 8 * len(data) \
            or len(data) != -(-n // 8) or (count is not None and n != count):
        raise ProtocolError(f"message {message.name!r}: malformed bit vector"
                            + (f" (expected {count} values)" if count is not None else ""))
    return np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=n).astype(bool)


def ints(message, field: str, low: int = 0, high: int = MAX_ROWS) -> np.ndarray:
    """An int64 array field whose values lie in ``[low, high)``."""
    value = message[field]
    if not isinstance(value, np.ndarray) or value.dtype != np.int64 or value.ndim != 1 or \
            (value.size and (value.min() < low or value.max() >= high)):
        raise ProtocolError(f"message {message.name!r}: field {field!r} is not a vector of integers in "
                            f"[{low}, {high})")
    return value


def flag(message, field: str) -> bool:
    value = message[field]
    if not isinstance(value, bool):
        raise ProtocolError(f"message {message.name!r}: field {field!r} is not true or false")
    return value


def _ciphertexts(party, values: list, prefix: str = "") -> dict:
    """Fresh (or re-randomized) ciphertexts of integer plaintexts as message fields."""
    return pack_vector(EncryptedVector(party.context, values, 0, fresh=True), prefix)


def _received(party, message, count: int | None = None, prefix: str = "") -> list:
    return unpack_vector(party.context, message, count, prefix).ciphertexts


def split_rows(n_rows: int, settings: BoostingSettings, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The training rows and the validation rows (from the shared seed only, never from labels)."""
    held = validation_rows(n_rows, settings.validation_fraction, seed) if settings.early_stops(n_rows) \
        else np.empty(0, dtype=np.int64)
    return np.setdiff1d(np.arange(n_rows), held), held


# -- a feature party ------------------------------------------------------------------------
def run_feature(ep: Endpoint, party: BoostingFeatureParty, settings: BoostingSettings, roster: Roster,
                checkpoints: Checkpoints | None = None, on_iteration: OnIteration | None = None,
                engine=None) -> BoostingFeatureParty:
    """A feature party's program: bins, sums ciphertexts, keeps its own splits; learns no gradient or label."""
    b = roster.label
    # Steps 1-2: the key, where to start, the validation rows
    party.receive_public_key(ep.recv(b, "public_key")["key"], engine)
    ep.send(b, "resume", "public", last_iteration=max(checkpoints) if checkpoints else -1)
    start = ep.recv(b, "start")
    n_rows, n_trees, first = start["n_rows"], start["n_trees"], start["iteration"]
    if n_rows != party.n_rows:
        raise DataError(f"party {party.role} has {party.n_rows} rows but party {b} has {n_rows}; the parties' rows "
                        "must be aligned")
    if not isinstance(n_trees, int) or not 1 <= n_trees <= 1000 or not isinstance(first, int) or \
            not -1 <= first < settings.max_iter or (first >= 0 and first not in (checkpoints or {})):
        raise ProtocolError(f"{party.role}: {b} sent a start it cannot follow (iteration {first!r}, "
                            f"{n_trees!r} trees per iteration)")
    train, held = split_rows(n_rows, settings, start["seed"])
    party.set_training_rows(train)
    if first >= 0:
        party.load_state(checkpoints[first])
    if flag(start, "finished"):
        return party
    for iteration in range(first + 1, settings.max_iter):
        ep.iteration = iteration
        if flag(ep.recv(b, "iteration"), "with_features"):
            chunks = layout.class_chunks(n_trees, len(train), settings.frac_bits, party.context.public_key.key_bits)
            gradients = [] if settings.hide_membership else \
                [_received(party, ep.recv(b, "gradients"), len(train)) for _ in chunks]
            for column in range(n_trees):
                chunk = next(i for i, c in enumerate(chunks) if column in c)
                if settings.hide_membership:
                    party.start_hidden_tree(settings.rules)
                else:
                    party.start_tree(gradients[chunk], layout.class_group(chunks[chunk], len(train),
                                                                          settings.frac_bits), settings.rules)
                _feature_rounds(ep, party, settings, roster, iteration * n_trees + column)
            if len(held):
                masks = party.leaf_masks(range(iteration * n_trees, (iteration + 1) * n_trees), party.codes[held])
                ep.send(b, "validation_masks", "plaintext", **bits(masks.ravel()))
        stop = flag(ep.recv(b, "control"), "stop")
        if on_iteration:
            on_iteration(iteration, {**party.state(), "stopped": stop})
        if stop:
            break
    return party


def _feature_rounds(ep: Endpoint, party: BoostingFeatureParty, settings: BoostingSettings, roster: Roster,
                    index: int) -> None:
    """Steps 4-6 of tree ``index`` (its place among all trees) at a feature party."""
    b = roster.label
    n_train = len(party.train_rows)
    while True:
        # Step 4: the new nodes (standard: their rows) and the nodes to evaluate
        if settings.hide_membership:
            message = ep.recv(b, "round")
            evaluate = ints(message, "evaluate")
            if flag(message, "done"):
                party.finish_tree(index, ints(message, "left", -1), ints(message, "right", -1))
                return
            chunks = layout.node_chunks(len(evaluate), n_train, settings.frac_bits,
                                        party.context.public_key.key_bits) if len(evaluate) else []
            received = [_received(party, message, n_train, prefix=f"chunk{i}_") for i in range(len(chunks))]
            # Step 5: every candidate of every node of the round
            combined, per_chunk = party.round_candidates(
                received, [layout.node_group(c, n_train, settings.frac_bits) for c in chunks])
            ep.send(b, "candidates", "ciphertext", counts=np.asarray([per_chunk], dtype=np.int64),
                    **_ciphertexts(party, combined))
        else:
            message = ep.recv(b, "nodes")
            party.apply_splits(ints(message, "parents"), ints(message, "lefts"), ints(message, "rights"),
                               unbits(message))
            if flag(message, "done"):
                party.finish_tree(index, ints(message, "left", -1), ints(message, "right", -1))
                return
            # Step 5: the candidates worth sending of the nodes to evaluate
            combined, counts = party.node_candidates(ints(message, "evaluate"))
            ep.send(b, "candidates", "ciphertext", counts=np.asarray(counts, dtype=np.int64),
                    **_ciphertexts(party, combined))
        # Step 6: the splits the label party chose among this party's candidates
        message = ep.recv(b, "split")
        nodes, keys, sizes = ints(message, "nodes"), ints(message, "keys"), ints(message, "sizes", 1)
        tied = ints(message, "tied")
        if not len(nodes) == len(keys) == len(sizes) or int(sizes.sum()) != len(tied):
            raise ProtocolError(f"{party.role}: a malformed 'split' from {b}")
        directions, columns, at = [], [], 0
        for node, key, size in zip(nodes.tolist(), keys.tolist(), sizes.tolist()):
            side, column = party.resolve(node, key, tied[at:at + size])
            directions.append(side)
            columns.append(column)
            at += size
        ep.send(b, "partition", "plaintext", columns=np.asarray(columns, dtype=np.int64),
                **bits(np.concatenate(directions) if directions else np.empty(0, bool)))


# -- the label party ----------------------------------------------------------------------------
def run_label(ep: Endpoint, party: BoostingLabelParty, settings: BoostingSettings, roster: Roster,
              checkpoints: Checkpoints | None = None, on_iteration: OnIteration | None = None,
              engine=None) -> dict:
    """The label party's program: keys, gradients, every split decision and leaf value.

    Returns ``{"n_iter": int, "validation_scores": [...], "seed": int}``.
    """
    features = roster.features
    # Step 1: the key pair
    key = party.make_keys(settings.key_bits, settings.insecure, engine)
    for k in features:
        ep.send(k, "public_key", "public", key=key)
    # Step 2: resume after the last iteration every party completed
    last = [ep.recv(k, "resume")["last_iteration"] for k in features]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= -1 for v in last):
        raise ProtocolError(f"{party.role}: a malformed 'resume'")
    first = min(*last, max(checkpoints) if checkpoints else -1)
    if first >= 0 and first not in (checkpoints or {}):
        raise ProtocolError(f"{party.role}: asked to resume after iteration {first}, which it has no checkpoint for")
    saved = checkpoints[first] if first >= 0 else {}
    seed = saved.get("seed", settings.random_state if settings.random_state is not None else secrets.randbits(63))
    train, held = split_rows(party.n_rows, settings, seed)
    party.start(settings.loss, train, held)
    scores = list(saved.get("scores", []))
    finished = bool(saved.get("stopped", False))
    if first >= 0:
        party.load_state(saved)
    for k in features:
        ep.send(k, "start", "public", iteration=first, finished=finished, seed=seed, n_rows=party.n_rows,
                n_trees=party.n_trees)
    iteration = first
    if not finished:
        for iteration in range(first + 1, settings.max_iter):
            ep.iteration = iteration
            with_features = iteration >= settings.label_party_trees
            for k in features:
                ep.send(k, "iteration", "public", with_features=with_features)
            stop = _label_iteration(ep, party, settings, roster, with_features, scores)
            stop = stop or iteration + 1 >= settings.max_iter
            for k in features:
                ep.send(k, "control", "public", stop=stop)
            if on_iteration:
                on_iteration(iteration, {**party.state(), "seed": seed, "scores": scores, "stopped": stop})
            if stop:
                break
    return {"n_iter": (iteration + 1) if party.trees else 0, "validation_scores": scores, "seed": seed}


def _label_iteration(ep: Endpoint, party: BoostingLabelParty, settings: BoostingSettings, roster: Roster,
                     with_features: bool, scores: list) -> bool:
    """Steps 3-7 of one iteration; returns whether the validation score says stop."""
    features = roster.features if with_features else ()
    f = settings.frac_bits
    # Step 3: gradients and hessians, quantized; encrypted for the feature parties
    big_g, big_h = party.gradients(f)
    n_train = len(party.train_rows)
    chunks = layout.class_chunks(party.n_trees, n_train, f, party.context.public_key.key_bits)
    if features and not settings.hide_membership:
        for classes in chunks:
            fields = _ciphertexts(party, party.encrypt_classes(big_g, big_h, classes, f))
            for k in features:
                ep.send(k, "gradients", "ciphertext", **fields)
    first_tree = len(party.trees)
    for column in range(party.n_trees):
        classes = next(c for c in chunks if column in c)
        _grow(ep, party, settings, roster, features, big_g[:, column], big_h[:, column], column,
              layout.class_group(classes, n_train, f), column - classes.start)
    # Step 7: the validation rows' leaves, by the parties' masks
    held = party.validation_rows
    if not len(held):
        return False
    codes = party.codes[held]
    others = {}
    for k in features:
        count = sum(len(party.trees[t]["tree"].leaves) for t in range(first_tree, len(party.trees)))
        others[k] = unbits(ep.recv(k, "validation_masks"), len(held) * count).reshape(len(held), count)
    at = 0
    for column, index in enumerate(range(first_tree, len(party.trees))):
        width = len(party.trees[index]["tree"].leaves)
        masks = [m[:, at:at + width] for m in others.values()]
        party.raw[held, column] += party.leaf_values(index, codes, masks)
        at += width
    scores.append(validation_score(settings.scoring, party.loss, party.raw[held], party.y[held]))
    return should_stop(scores, settings)


def _grow(ep: Endpoint, party: BoostingLabelParty, settings: BoostingSettings, roster: Roster, features: tuple,
          g: np.ndarray, h: np.ndarray, column: int, group, slot: int) -> None:
    """Steps 4-6: grow one tree with the feature parties ``features`` (none: on this party's columns only)."""
    rules, f = settings.rules, settings.frac_bits
    grower = TreeGrower(g, h, party.train_rows, rules, settings.max_depth, settings.max_leaf_nodes,
                        settings.learning_rate, party.loss.value_scale)
    values = np.column_stack([g, h, np.ones(len(g), dtype=np.int64)])
    me = len(roster.features)                       # this party's index among the data parties (the last)
    index_of = {k: i for i, k in enumerate(roster.features)}
    n_train = len(party.train_rows)
    applied: list = []
    foreign: dict = {}                              # a feature party's split: its column index, by node
    lists = 0                                       # hidden membership: candidate lists (chunks) so far
    while True:
        nodes = grower.to_evaluate()
        done = not nodes and not grower.to_split()
        shape = grower.tree(lambda split: split[0]) if done else None
        ends = {"left": shape.left, "right": shape.right} if done else {}
        # Step 4: the new nodes and which to evaluate
        if settings.hide_membership:
            fields = {}
            if features and nodes:
                node_chunks = layout.node_chunks(len(nodes), n_train, f, party.context.public_key.key_bits)
                for i, chunk in enumerate(node_chunks):
                    fields.update(_ciphertexts(party, party.encrypt_nodes([nodes[j] for j in chunk], g, h, f),
                                                f"chunk{i}_"))
            for k in features:
                ep.send(k, "round", "ciphertext", evaluate=np.asarray([n.id for n in nodes], dtype=np.int64),
                        done=done, **ends, **fields)
        else:
            parents = np.asarray([a[0] for a in applied], dtype=np.int64)
            lefts = np.asarray([a[1] for a in applied], dtype=np.int64)
            rights = np.asarray([a[2] for a in applied], dtype=np.int64)
            directions = np.concatenate([a[3] for a in applied]) if applied else np.empty(0, bool)
            for k in features:
                ep.send(k, "nodes", "plaintext", parents=parents, lefts=lefts, rights=rights,
                        evaluate=np.asarray([n.id for n in nodes], dtype=np.int64), done=done, **ends,
                        **bits(directions))
        if done:
            break
        # Step 5: every party's candidates; the best split of each node
        found = {n.id: (-np.inf, None) for n in nodes}
        for k in features:
            _feature_best(ep, party, settings, k, index_of[k], nodes, group, slot, found, lists)
        if settings.hide_membership and features and nodes:
            lists += len(layout.node_chunks(len(nodes), n_train, f, party.context.public_key.key_bits))
        for node in nodes:
            gain, split = party.own_best(node, values, rules)
            if gain > found[node.id][0]:
                found[node.id] = (gain, (me, split))
            grower.set_best(node, *found[node.id])
        # Step 6: the nodes to split now; each feature party says which rows go left at its own
        chosen = grower.to_split()
        asked = {k: [n for n in chosen if n.split[0] == index_of[k]] for k in features}
        for k in features:
            tied = [n.split[2] for n in asked[k]]
            ep.send(k, "split", "public", nodes=np.asarray([n.id for n in asked[k]], dtype=np.int64),
                    keys=np.asarray([n.split[1] for n in asked[k]], dtype=np.int64),
                    sizes=np.asarray([len(t) for t in tied], dtype=np.int64),
                    tied=np.concatenate(tied).astype(np.int64) if tied else np.empty(0, np.int64))
        directions, columns = {}, {}
        for k in features:
            message = ep.recv(k, "partition")
            sizes = [n_train if settings.hide_membership else len(n.rows) for n in asked[k]]
            received = unbits(message, sum(sizes))
            got = ints(message, "columns", 0, 1 << 20)
            if len(got) != len(asked[k]):
                raise ProtocolError(f"{party.role}: {k} sent {len(got)} split columns for {len(asked[k])} splits")
            at = 0
            for node, size, col in zip(asked[k], sizes, got.tolist()):
                side = received[at:at + size]
                if settings.hide_membership:        # directions of every training row: keep the node's
                    side = side[np.searchsorted(party.train_rows, node.rows)]
                directions[node.id], columns[node.id] = side, col
                at += size
        applied = []
        for node in chosen:
            side = directions[node.id] if node.split[0] != me else party.split_rows(node, node.split[1])
            left, right = grower.split(node, side)
            applied.append((node.id, left.id, right.id, side))
        foreign.update(columns)
    leaves = np.empty(party.n_rows, dtype=np.int64)
    for position, leaf in enumerate(shape.leaves.tolist()):
        leaves[grower.nodes[leaf].rows] = position
    own = {n.id: n.split[1] for n in grower.nodes if n.children is not None and n.split[0] == me}
    party.add_tree(shape, own, column, leaves[party.train_rows], foreign)


def _feature_best(ep: Endpoint, party: BoostingLabelParty, settings: BoostingSettings, k: str, index: int,
                  nodes: list, group, slot: int, found: dict, lists: int) -> None:
    """Decrypt feature party ``k``'s candidates of ``nodes``; keep each node's best if it beats ``found``.

    A split keeps the key of the candidate list it came from: the node (standard),
    or the chunk's number among the tree's rounds, ``lists`` before this one (hidden).
    """
    message = ep.recv(k, "candidates")
    counts = ints(message, "counts", 0, MAX_ROWS)
    n_train = len(party.train_rows)
    rules, f = settings.rules, settings.frac_bits
    if settings.hide_membership:
        chunks = layout.node_chunks(len(nodes), n_train, f, party.context.public_key.key_bits)
        if len(counts) != 1:
            raise ProtocolError(f"{party.role}: {k} sent {len(counts)} candidate counts, expected one per round")
        groups = [layout.node_group(c, n_train, f) for c in chunks]
        per = int(counts[0])
        total = sum(-(-per // g.per_plaintext(party.context.public_key.key_bits)) for g in groups)
        ciphertexts = _received(party, message, total)
        at = 0
        for number, (chunk, grp) in enumerate(zip(chunks, groups)):
            used = -(-per // grp.per_plaintext(party.context.public_key.key_bits))
            sums = party.decrypt_groups(ciphertexts[at:at + used], grp, per)
            at += used
            for slot_in_chunk, j in enumerate(chunk):
                node = nodes[j]
                left = sums[:, 3 * slot_in_chunk:3 * slot_in_chunk + 3]
                gain, tied = best(gains(left[:, 0], left[:, 1], node.g, node.h, rules, left[:, 2], len(node.rows)))
                if gain > found[node.id][0]:
                    found[node.id] = (gain, (index, lists + number, tied))
        return
    if len(counts) != len(nodes):
        raise ProtocolError(f"{party.role}: {k} sent candidates of {len(counts)} nodes, expected {len(nodes)}")
    total = int(counts.sum())
    per = group.per_plaintext(party.context.public_key.key_bits)
    sums = party.decrypt_groups(_received(party, message, -(-total // per)), group, total)
    at = 0
    for node, count in zip(nodes, counts.tolist()):
        left = sums[at:at + count]
        at += count
        gain, tied = best(gains(left[:, 2 * slot], left[:, 2 * slot + 1], node.g, node.h, rules))
        if gain > found[node.id][0]:
            found[node.id] = (gain, (index, node.id, tied))
