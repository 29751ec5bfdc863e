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
shared :class:`~vfl.protocols.trees.settings.TreeSettings` and the
:class:`~vfl.protocols.roster.Roster` (no coordinator).  ``checkpoints`` maps
a completed iteration to the party's saved state; ``on_iteration(iteration,
state)`` is called after every completed iteration.
"""

from __future__ import annotations

import secrets
from typing import Callable, Mapping

import numpy as np

from vfl.errors import DataError, ProtocolError
from vfl.parties.trees import TreeGrower, best, gains, layout, validation_score
from vfl.parties.trees.splits import sums_to_send
from vfl.parties.trees.feature_party import BoostingFeatureParty
from vfl.parties.trees.label_party import BoostingLabelParty, ForeignSums
from vfl.protocols.trees.settings import TreeSettings, should_stop
from vfl.parties.holdout import check_split, validation_rows
from vfl.protocols.fields import MAX_ROWS, bits, flag, ints, unbits
from vfl.protocols.fields import ciphertexts as _ciphertexts, received as _received
from vfl.protocols.roster import Roster
from vfl.transport import Endpoint

Checkpoints = Mapping[int, dict]
OnIteration = Callable[[int, dict], None]

#: Ciphertexts per message at most (16 MB at 2048 bits): far below the network's frame bound however many rows.
PART = 1 << 15


def send_ciphertexts(ep: Endpoint, to: str, name: str, party, values: list) -> None:
    """``values`` (fresh ciphertexts) to ``to`` as messages ``name`` of at most :data:`PART` each."""
    parts = max(1, -(-len(values) // PART))
    for i in range(parts):
        ep.send(to, name, "ciphertext", part=i, parts=parts, **_ciphertexts(party, values[i * PART:(i + 1) * PART]))


def recv_ciphertexts(ep: Endpoint, frm: str, name: str, party, count: int) -> list:
    """The ``count`` ciphertexts :func:`send_ciphertexts` sent, checked part by part."""
    out = []
    while True:
        message = ep.recv(frm, name)
        part, parts = message["part"], message["parts"]
        expected = max(1, -(-count // PART))
        if part != -(-len(out) // PART) or parts != expected:
            raise ProtocolError(f"message {name!r} from {frm}: part {part!r} of {parts!r}, expected part "
                                f"{-(-len(out) // PART)} of {expected} for {count} ciphertexts")
        out += _received(party, message, min(PART, count - len(out)))
        if part == parts - 1:
            return out


def split_rows(n_rows: int, settings: TreeSettings, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """The training rows and the validation rows (from the shared seed only, never from labels).

    Every party refuses alike a split that leaves fewer rows to train on than one
    split needs (``2 * min_samples_leaf``), or too few to validate on: the rule of
    the linear models (:func:`~vfl.parties.holdout.check_split`).
    """
    if settings.early_stops(n_rows):
        least = 2 * settings.min_samples_leaf
        check_split(n_rows, settings.validation_fraction, least,
                    f"the {least} a tree needs for one split (2 x min_samples_leaf)",
                    "or lower min_samples_leaf, or turn early_stopping off")
    held = validation_rows(n_rows, settings.validation_fraction, seed) if settings.early_stops(n_rows) \
        else np.empty(0, dtype=np.int64)
    return np.setdiff1d(np.arange(n_rows), held), held


# -- a feature party ------------------------------------------------------------------------
def train_feature(ep: Endpoint, party: BoostingFeatureParty, settings: TreeSettings, roster: Roster,
                checkpoints: Checkpoints | None = None, on_iteration: OnIteration | None = None,
                engine=None) -> BoostingFeatureParty:
    """A feature party's program: bins, sums ciphertexts, keeps its own splits; learns no gradient or label."""
    b = roster.label
    # Steps 1-2: the key, where to start, the validation rows
    party.receive_public_key(ep.recv(b, "public_key")["key"], engine)
    ep.send(b, "resume", "public", last_iteration=max(checkpoints) if checkpoints else -1)
    start = ep.recv(b, "start")
    n_rows, n_trees, first, seed = start["n_rows"], start["n_trees"], start["iteration"], start["seed"]
    if n_rows != party.n_rows:
        raise DataError(f"party {party.role} has {party.n_rows} rows but party {b} has {n_rows}; the parties' rows "
                        "must be aligned")
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (n_trees, first, seed)) or \
            not 1 <= n_trees <= 1000 or not -1 <= first < settings.max_iter or \
            (first >= 0 and first not in (checkpoints or {})):
        raise ProtocolError(f"{party.role}: {b} sent a start it cannot follow (iteration {first!r}, "
                            f"{n_trees!r} trees per iteration)")
    train, held = split_rows(n_rows, settings, seed)
    party.set_training_rows(train)
    if first >= 0:
        party.load_state(checkpoints[first])
    if flag(start, "finished"):
        return party
    key_bits = party.context.public_key.key_bits
    for iteration in range(first + 1, settings.max_iter):
        ep.iteration = iteration
        if flag(ep.recv(b, "iteration"), "with_features"):
            chunks = layout.class_chunks(n_trees, len(train), settings.frac_bits, settings.loss, key_bits)
            gradients = [] if settings.hide_membership else \
                [recv_ciphertexts(ep, b, "gradients", party, len(train)) for _ in chunks]
            for column in range(n_trees):
                chunk = next(i for i, c in enumerate(chunks) if column in c)
                party.start_tree(settings.rules, None if settings.hide_membership else gradients[chunk])
                _feature_rounds(ep, party, settings, roster, iteration * n_trees + column,
                                layout.class_group(chunks[chunk], len(train), settings.frac_bits, settings.loss,
                                                   key_bits))
            if len(held):
                masks = party.leaf_masks(range(iteration * n_trees, (iteration + 1) * n_trees), party.codes[held])
                ep.send(b, "validation_masks", "plaintext", **bits(masks.ravel()))
        stop = flag(ep.recv(b, "control"), "stop")
        if on_iteration:
            on_iteration(iteration, {**party.state(), "stopped": stop})
        if stop:
            break
    return party


def _feature_rounds(ep: Endpoint, party: BoostingFeatureParty, settings: TreeSettings, roster: Roster,
                    index: int, group) -> None:
    """Steps 4-6 of tree ``index`` (its place among all trees) at a feature party."""
    b = roster.label
    n_train = len(party.train_rows)
    key_bits = party.context.public_key.key_bits
    while True:
        # Step 4: the new nodes (standard: their rows) and the nodes to evaluate
        message = ep.recv(b, "round" if settings.hide_membership else "nodes")
        if not settings.hide_membership:
            party.apply_splits(ints(message, "parents"), ints(message, "lefts"), ints(message, "rights"),
                               unbits(message))
        if flag(message, "done"):
            party.finish_tree(index, ints(message, "left", -1), ints(message, "right", -1))
            return
        # Step 5: the left sums of its candidates
        if settings.hide_membership:
            slots = message["slots"]
            if not isinstance(slots, int) or isinstance(slots, bool) or not 0 <= slots <= 1 << 16:
                raise ProtocolError(f"{party.role}: a malformed 'round' from {b}")
            counts = layout.counts_travel(settings.rules, settings.loss)
            chunks = layout.node_chunks(slots, n_train, settings.frac_bits, settings.loss, key_bits, counts) \
                if slots else []
            received = [recv_ciphertexts(ep, b, "round_gradients", party, n_train) for _ in chunks]
            combined = party.round_candidates(received, [layout.node_group(c, n_train, settings.frac_bits,
                                                                           settings.loss, key_bits, counts)
                                                         for c in chunks])
            ep.send(b, "candidates", "ciphertext", count=len(party.table), **_ciphertexts(party, combined))
        else:
            combined, counts, keep = party.node_candidates(ints(message, "evaluate"), group)
            ep.send(b, "candidates", "ciphertext", counts=np.asarray(counts, dtype=np.int64), **bits(keep),
                    **_ciphertexts(party, combined))
        # Step 6: the splits the label party chose among this party's candidates
        message = ep.recv(b, "split")
        nodes, sizes, tied = ints(message, "nodes"), ints(message, "sizes", 1), ints(message, "tied")
        if len(nodes) != len(sizes) or int(sizes.sum()) != len(tied):
            raise ProtocolError(f"{party.role}: a malformed 'split' from {b}")
        directions, columns, at = [], [], 0
        for node, size in zip(nodes.tolist(), sizes.tolist()):
            side, column = party.resolve(node, tied[at:at + size])
            directions.append(side)
            columns.append(column)
            at += size
        ep.send(b, "partition", "plaintext", columns=np.asarray(columns, dtype=np.int64),
                **bits(np.concatenate(directions) if directions else np.empty(0, bool)))


# -- the label party ----------------------------------------------------------------------------
def train_label(ep: Endpoint, party: BoostingLabelParty, settings: TreeSettings, roster: Roster,
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
    return {"n_iter": iteration + 1, "validation_scores": scores, "seed": seed}


def _label_iteration(ep: Endpoint, party: BoostingLabelParty, settings: TreeSettings, roster: Roster,
                     with_features: bool, scores: list) -> bool:
    """Steps 3-7 of one iteration; returns whether the validation score says stop."""
    features = roster.features if with_features else ()
    f = settings.frac_bits
    # Step 3: gradients and hessians, quantized; encrypted for the feature parties
    big_g, big_h = party.gradients(f, settings.loss)
    n_train = len(party.train_rows)
    chunks = layout.class_chunks(party.n_trees, n_train, f, settings.loss, party.context.public_key.key_bits)
    if features and not settings.hide_membership:
        for classes in chunks:
            encrypted = party.encrypt_classes(big_g, big_h, classes, f, settings.loss)
            for k in features:
                send_ciphertexts(ep, k, "gradients", party, encrypted)
    first_tree = len(party.trees)
    for column in range(party.n_trees):
        classes = next(c for c in chunks if column in c)
        _grow(ep, party, settings, roster, features, big_g[:, column], big_h[:, column], column,
              layout.class_group(classes, n_train, f, settings.loss, party.context.public_key.key_bits),
              column - classes.start)
    # Step 7: the validation rows' leaves, by the parties' masks
    held = party.validation_rows
    if not len(held):
        return False
    new = range(first_tree, len(party.trees))
    widths = [len(party.trees[t]["tree"].leaves) for t in new]
    others = [unbits(ep.recv(k, "validation_masks"), len(held) * sum(widths)).reshape(len(held), sum(widths))
              for k in features]
    at = 0
    for column, (index, width) in enumerate(zip(new, widths)):
        party.raw[held, column] += party.leaf_values(index, party.codes[held], [m[:, at:at + width] for m in others])
        at += width
    scores.append(validation_score(settings.scoring, party.loss, party.raw[held], party.y[held]))
    return should_stop(scores, settings)


def _grow(ep: Endpoint, party: BoostingLabelParty, settings: TreeSettings, roster: Roster, features: tuple,
          g: np.ndarray, h: np.ndarray, column: int, group, slot: int) -> None:
    """Steps 4-6: grow one tree with the feature parties ``features`` (none: on this party's columns only).

    ``group`` is the slot layout of a standard-mode candidate and ``slot`` this
    tree's class among its slots.
    """
    rules = settings.rules
    grower = TreeGrower(g, h, party.train_rows, rules, settings.max_depth, settings.max_leaf_nodes,
                        settings.learning_rate, party.loss.value_scale)
    values = np.column_stack([g, h, np.ones(len(g), dtype=np.int64)])
    me = len(roster.features)                       # this party's index among the data parties (the last)
    index_of = {k: i for i, k in enumerate(roster.features)}
    counts = settings.hide_membership and layout.counts_travel(rules, settings.loss)
    known = {k: ForeignSums(3 if counts else 2) for k in features}
    applied: list = []
    foreign: dict = {}                              # a feature party's split: its column index, by node
    while True:
        nodes = grower.to_evaluate()
        done = not nodes and not grower.to_split()
        shape = grower.tree(lambda split: split[0]) if done else None
        ends = {"left": shape.left, "right": shape.right} if done else {}
        plan = sums_to_send([n.id for n in nodes], grower.parents(), grower.sizes(), grower.children())
        # Step 4: the new nodes and which to evaluate
        if settings.hide_membership:
            encrypted = _round_gradients(party, grower, plan, g, h, settings) if features and nodes else []
            for k in features:
                ep.send(k, "round", "public", slots=len(plan), done=done, **ends)
                for chunk in encrypted:
                    send_ciphertexts(ep, k, "round_gradients", party, chunk)
        else:
            for k in features:
                ep.send(k, "nodes", "plaintext", evaluate=np.asarray([n.id for n in nodes], dtype=np.int64),
                        done=done, **ends, **_applied(applied))
        if done:
            break
        # Step 5: every party's candidates; the best split of each node
        found = {n.id: (-np.inf, None) for n in nodes}
        for k in features:
            _feature_best(ep, party, settings, k, known[k], plan, grower, group, slot)
            for node in nodes:
                sums = known[k].sums[node.id]
                gain, tied = best(gains(sums[:, 0], sums[:, 1], node.g, node.h, rules,
                                        *((sums[:, 2], len(node.rows)) if counts else ())))
                if gain > found[node.id][0]:
                    found[node.id] = (gain, (index_of[k], known[k].positions[node.id][tied]))
        for node in nodes:
            gain, split = party.own_best(node, values, rules)
            if gain > found[node.id][0]:
                found[node.id] = (gain, (me, split))
            grower.set_best(node, *found[node.id])
        # Step 6: the nodes to split now; each feature party says which rows go left at its own
        chosen = grower.to_split()
        directions = _partitions(ep, party, settings, features, index_of, chosen, foreign)
        applied = []
        for node in chosen:
            side = directions[node.id] if node.split[0] != me else party.split_rows(node, node.split[1])
            left, right = grower.split(node, side)
            applied.append((node.id, left.id, right.id, side))
    leaves = np.empty(party.n_rows, dtype=np.int64)
    for position, leaf in enumerate(shape.leaves.tolist()):
        leaves[grower.nodes[leaf].rows] = position
    own = {n.id: n.split[1] for n in grower.nodes if n.children is not None and n.split[0] == me}
    party.add_tree(shape, own, column, leaves[party.train_rows], foreign)


def _applied(applied: list) -> dict:
    """The splits made since the last round, as ``nodes`` fields: parents, children, every row's direction."""
    return {"parents": np.asarray([a[0] for a in applied], dtype=np.int64),
            "lefts": np.asarray([a[1] for a in applied], dtype=np.int64),
            "rights": np.asarray([a[2] for a in applied], dtype=np.int64),
            **bits(np.concatenate([a[3] for a in applied]) if applied else np.empty(0, bool))}


def _round_gradients(party: BoostingLabelParty, grower, plan: list, g, h, settings: TreeSettings) -> list:
    """Hidden membership: per chunk of the sent nodes, one ciphertext per training row (its node's slots filled)."""
    sent = [grower.nodes[s] for s, _, _ in plan]
    counts = layout.counts_travel(settings.rules, settings.loss)
    chunks = layout.node_chunks(len(sent), len(party.train_rows), settings.frac_bits, settings.loss,
                                party.context.public_key.key_bits, counts)
    return [party.encrypt_nodes([sent[j] for j in chunk], g, h, settings.frac_bits, settings.loss, counts)
            for chunk in chunks]


def _feature_best(ep: Endpoint, party: BoostingLabelParty, settings: TreeSettings, k: str, known: ForeignSums,
                  plan: list, grower, group, slot: int) -> None:
    """Decrypt feature party ``k``'s sums of the round's sent nodes into ``known`` (both modes)."""
    message = ep.recv(k, "candidates")
    n_train = len(party.train_rows)
    key_bits = party.context.public_key.key_bits
    if settings.hide_membership:
        count = message["count"]
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_ROWS:
            raise ProtocolError(f"{party.role}: {k} sent a malformed candidate count")
        counts = layout.counts_travel(settings.rules, settings.loss)
        width = 3 if counts else 2
        chunks = layout.node_chunks(len(plan), n_train, settings.frac_bits, settings.loss, key_bits, counts)
        groups = [layout.node_group(c, n_train, settings.frac_bits, settings.loss, key_bits, counts) for c in chunks]
        used = [-(-count // grp.per_plaintext(key_bits)) for grp in groups]
        ciphertexts = _received(party, message, sum(used))
        at = 0
        for chunk, grp, n_used in zip(chunks, groups, used):
            sums = party.decrypt_groups(ciphertexts[at:at + n_used], grp, count)
            at += n_used
            for place, j in enumerate(chunk):
                known.add(*plan[j], sums[:, width * place:width * (place + 1)])
        return
    counts = ints(message, "counts", 0, MAX_ROWS)
    if len(counts) != len(plan):
        raise ProtocolError(f"{party.role}: {k} sent the sums of {len(counts)} nodes, expected {len(plan)}")
    total = int(counts.sum())
    per = group.per_plaintext(key_bits)
    sums = party.decrypt_groups(_received(party, message, -(-total // per)), group, total)
    keep = unbits(message, sum(c * len(served) for c, (_, _, served) in zip(counts.tolist(), plan)))
    at = bit = 0
    for (sent, parent, served), count in zip(plan, counts.tolist()):
        masks = [keep[bit + i * count:bit + (i + 1) * count] for i in range(len(served))]
        known.add(sent, parent, served, sums[at:at + count, 2 * slot:2 * slot + 2], masks)
        at += count
        bit += count * len(served)


def _partitions(ep: Endpoint, party: BoostingLabelParty, settings: TreeSettings, features: tuple,
                index_of: dict, chosen: list, foreign: dict) -> dict:
    """Step 6 with every feature party: its chosen splits (as tied positions); the rows going left, by node."""
    n_train = len(party.train_rows)
    asked = {k: [n for n in chosen if n.split[0] == index_of[k]] for k in features}
    for k in features:
        tied = [n.split[1] for n in asked[k]]
        ep.send(k, "split", "public", nodes=np.asarray([n.id for n in asked[k]], dtype=np.int64),
                sizes=np.asarray([len(t) for t in tied], dtype=np.int64),
                tied=np.concatenate(tied).astype(np.int64) if tied else np.empty(0, np.int64))
    directions = {}
    for k in features:
        message = ep.recv(k, "partition")
        sizes = [n_train if settings.hide_membership else len(n.rows) for n in asked[k]]
        received = unbits(message, sum(sizes))
        columns = ints(message, "columns", 0, 1 << 20)
        if len(columns) != len(asked[k]):
            raise ProtocolError(f"{party.role}: {k} sent {len(columns)} split columns for {len(asked[k])} splits")
        at = 0
        for node, size, column in zip(asked[k], sizes, columns.tolist()):
            side = received[at:at + size]
            if settings.hide_membership:            # every training row's direction: keep the node's
                side = side[np.searchsorted(party.train_rows, node.rows)]
            directions[node.id], foreign[node.id] = side, column
            at += size
    return directions


# The names before every family's programs were called train_<role>.
run_feature = train_feature
run_label = train_label
