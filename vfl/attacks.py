"""Attacks the documentation measures, run on what a party really received (its transcript).

:func:`instance_spaces` replays the boosting messages a feature party received
and rebuilds, tree by tree, which training rows each node held: in the standard
mode (as in FATE's SecureBoost) the label party sends exactly that; with
``hide_membership`` nothing in the messages says it, and the function finds no
tree.  :func:`leaf_label_attack` is the instance-space label attack built on it
(after ID2Graph, arXiv 2307.10318): rows that share leaves share labels, so a
feature party that knows the labels of a few rows (its own customers' outcomes,
say) labels every other row by a logistic regression on the leaves each row
reached.  :func:`own_columns_attack` is what the same party predicts from its
own columns alone, the baseline no protocol can take away, and
:func:`own_split_patterns` what its own splits alone say of each row (which
leaves they allow, per tree): the leaves a feature party can use when it is
told no row's node.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.impute import SimpleImputer
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler


def instance_spaces(transcript, party: str, train_rows) -> np.ndarray:
    """Per training row and tree, the leaf it reached, as ``party`` saw it (rows by trees; no tree: 0 columns).

    ``transcript`` must keep payloads (``Transcript(keep_payloads=True)``).
    Only the ``nodes`` messages ``party`` received are read.
    """
    train_rows = np.asarray(train_rows)
    trees, rows = [], None
    for _, receiver, message in transcript.messages():
        if receiver != party or message.name != "nodes":
            continue
        if rows is None:
            rows = {0: np.arange(len(train_rows))}
        data, count = message.fields["bits"], message.fields["count"]
        directions = np.unpackbits(np.frombuffer(data, dtype=np.uint8), count=count).astype(bool)
        at = 0
        for parent, left, right in zip(message.fields["parents"].tolist(), message.fields["lefts"].tolist(),
                                       message.fields["rights"].tolist()):
            members = rows.pop(parent)
            side = directions[at:at + len(members)]
            at += len(members)
            rows[left], rows[right] = members[side], members[~side]
        if message.fields["done"]:
            leaf = np.empty(len(train_rows), dtype=np.int64)
            for node, members in rows.items():
                leaf[members] = node
            trees.append(leaf)
            rows = None
    return np.column_stack(trees) if trees else np.empty((len(train_rows), 0), dtype=np.int64)


def own_split_patterns(party) -> np.ndarray:
    """Per training row and tree a feature party took part in, the pattern of leaves its own splits allow."""
    columns = []
    for tree in party.trees:
        masks = party.leaf_masks([tree["index"]])
        columns.append(masks @ (1 << np.arange(masks.shape[1], dtype=np.int64)))
    return np.column_stack(columns) if columns else np.empty((party.n_rows, 0), dtype=np.int64)


def leaf_label_attack(leaves: np.ndarray, known: np.ndarray, labels: np.ndarray) -> np.ndarray | None:
    """Guess every row's label from the leaves it reached, given the labels of the rows ``known``.

    Returns the guesses for all rows, or ``None`` when there are no leaves (nothing to attack with).
    """
    if leaves.shape[1] == 0:
        return None
    onehot = OneHotEncoder(handle_unknown="ignore").fit_transform(leaves)
    model = LogisticRegression(C=1.0, max_iter=2000).fit(onehot[known], labels[known])
    return model.predict(onehot)


def own_columns_attack(features: np.ndarray, known: np.ndarray, labels: np.ndarray) -> np.ndarray:
    """Guess every row's label from the party's own columns alone (missing values imputed by the column mean)."""
    model = make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression(C=1.0, max_iter=2000))
    return model.fit(features[known], labels[known]).predict(features)
