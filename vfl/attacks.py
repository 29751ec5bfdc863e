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

For the split network (:mod:`vfl.parties.mlp`), :func:`norm_attack` and
:func:`direction_attack` are Li et al.'s label attacks ("Label Leakage and
Protection in Two-party Split Learning", ICLR 2022) on the per-row gradients
``grad_h`` plain split learning sends back to a feature party, scored by
:func:`attack_auc`.  When a party learns only its own parameters' gradients
summed over a batch, :func:`gradient_map` gives the linear map from the
interactive layer's per-row gradients ``delta`` to those sums, and
:func:`recover_deltas` the least-squares estimate of ``delta`` the party can
make from them: exact when that map is injective (never beyond
:func:`injective_batch_limit` rows), a projection of ``delta`` otherwise.
"""

from __future__ import annotations

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.impute import SimpleImputer
from sklearn.metrics import roc_auc_score
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import OneHotEncoder, StandardScaler

from vfl.errors import ConfigurationError
from vfl.parties.mlp.activations import derivative
from vfl.parties.mlp.layers import Layer, backward
from vfl.parties.mlp.split import join_backward


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


def norm_attack(grad_h: np.ndarray) -> np.ndarray:
    """Li et al.'s norm attack: each row's score is the L2 norm of its gradient (larger: more likely positive).

    On imbalanced binary data the rare positives are the rows the model fits worst, so their output
    delta ``p - y`` (and with it the whole gradient) is larger in size than the negatives'.

    Parameters
    ----------
    grad_h : ndarray
        (rows, width): the gradient on each row's bottom output, one row per example.

    Returns
    -------
    ndarray
        (rows,) scores, larger for rows more likely positive.
    """
    return np.linalg.norm(np.asarray(grad_h, dtype=np.float64), axis=1)


def direction_attack(grad_h: np.ndarray, known_row: int) -> np.ndarray:
    """Li et al.'s direction attack: each row's cosine similarity with the gradient of one row of known label.

    With one output unit the gradient of row ``i`` is ``(p_i - y_i)`` times a vector that changes little
    from row to row, and ``p_i - y_i`` is negative for positives and positive for negatives: a
    **positive cosine means the same label as** ``known_row``, a negative cosine the other label (a row
    with a zero gradient scores 0).  With a positive ``known_row`` the scores rank rows as positives
    first (as Li et al. use it); with a negative one, negate them.

    Parameters
    ----------
    grad_h : ndarray
        (rows, width): the gradient on each row's bottom output.
    known_row : int
        The row whose label the attacker knows (its own score is 1: leave it out of an AUC).

    Returns
    -------
    ndarray
        (rows,) cosine similarities in [-1, 1].
    """
    grad_h = np.asarray(grad_h, dtype=np.float64)
    norms = np.linalg.norm(grad_h, axis=1)
    scale = norms * norms[known_row]
    return np.divide(grad_h @ grad_h[known_row], scale, out=np.zeros(len(grad_h)), where=scale > 0)


def attack_auc(scores: np.ndarray, labels: np.ndarray, *, either_orientation: bool = False) -> float:
    """The AUC of ``scores`` ranking the rows with label 1 above the others (``roc_auc_score``).

    Li et al.'s leak AUC keeps each attack's fixed orientation — the norm attack ranks large norms as
    positive, the direction attack ranks large cosines with a *positive* row's gradient as positive — and
    never flips a score (their code, ``compute_auc`` in ``model.py`` of OscarcarLi/label-protection,
    is ``roc_auc_score`` of the min-max scaled score); so is the default here.  ``either_orientation``
    returns ``max(AUC, 1 - AUC)``, which the paper does not use: the leak of an attacker free to pick
    the orientation after the fact, an upper bound used where no orientation is known in advance (the
    estimates of :func:`recover_deltas`), so that a figure near 0.5 there cannot hide a flipped leak.

    Parameters
    ----------
    scores : ndarray
        (rows,) attack scores.
    labels : ndarray
        (rows,) true labels, 0 or 1, both present.
    either_orientation : bool, default False
    """
    auc = float(roc_auc_score(np.asarray(labels), np.asarray(scores, dtype=np.float64)))
    return max(auc, 1.0 - auc) if either_orientation else auc


def party_gradients(stack: list[Layer], acts: list[np.ndarray], block: np.ndarray, activation: str,
                    delta: np.ndarray) -> np.ndarray:
    """A feature party's raw gradients (sums over the rows), flattened in :func:`gradient_map`'s order, from ``delta``.

    Parameters
    ----------
    stack : list of (W, b)
        The party's bottom layers (``[]``: none).
    acts : list of ndarray
        :func:`~vfl.parties.mlp.layers.forward`'s activations of that stack on the batch (``acts[-1]``: ``h_k``).
    block : ndarray
        The party's block ``W_k`` of the interactive weights.
    activation : str
        The hidden activation.
    delta : ndarray
        (rows, units): the gradient on the interactive layer's pre-activation ``z``.

    Returns
    -------
    ndarray
        Each bottom layer's ``dW`` then ``db`` (C order), then ``dW_k``.
    """
    (block_grad,), _, (grad_h,) = join_backward([acts[-1]], [block], delta)
    parts = [block_grad]
    if stack:
        grads, _ = backward(stack, acts, derivative(activation, acts[-1], grad_h), [activation] * len(stack))
        parts = [a for layer in grads for a in layer] + parts
    return np.concatenate([a.ravel() for a in parts])


def gradient_map(stack: list[Layer], acts: list[np.ndarray], block: np.ndarray, activation: str) -> np.ndarray:
    """The matrix ``J`` with ``party_gradients(..., delta) == J @ delta.ravel()`` for this batch.

    Every gradient of a feature party's own parameters — its bottom layers' weights and intercepts,
    then its interactive block ``W_k`` — is linear in ``delta`` (the (rows, units) gradient on the
    interactive layer's pre-activation), with coefficients only that party knows: its columns, its
    activations and its weights.  Column ``j`` of ``J`` is :func:`party_gradients` of the ``j``-th basis
    matrix (row ``j // units``, unit ``j % units``): that row's own gradients (the gradients are sums
    over the rows, and the basis matrix is zero on every other row), all columns computed at once.

    Parameters
    ----------
    stack, acts, block, activation
        As :func:`party_gradients`.

    Returns
    -------
    ndarray
        (parameter count, rows * units).
    """
    rows, units = acts[-1].shape[0], block.shape[1]
    count = rows * units
    # one "virtual row" per column: row j // units of the batch with delta = the basis vector j % units
    virtual = [np.repeat(a, units, axis=0) for a in acts]
    delta = np.tile(np.eye(units), (rows, 1))
    parts = [(virtual[-1][:, :, None] * delta[:, None, :]).reshape(count, -1)]
    if stack:
        d = derivative(activation, virtual[-1], delta @ block.T)
        layers = []
        for i in range(len(stack) - 1, -1, -1):
            layers.insert(0, ((virtual[i][:, :, None] * d[:, None, :]).reshape(count, -1), d))
            if i:
                d = derivative(activation, virtual[i], d @ stack[i][0].T)
        parts = [a for layer in layers for a in layer] + parts
    return np.concatenate(parts, axis=1).T


def recover_deltas(jacobian: np.ndarray, gradients: np.ndarray, rows: int, units: int) -> np.ndarray:
    """The minimum-norm least-squares ``delta`` (rows, units) with ``J @ delta.ravel() = gradients``.

    The attack of a feature party that learns only its own parameters' gradients summed over a batch
    (never a per-row gradient): ``gradients`` are the raw sums in :func:`party_gradients`' order (a party
    told scikit-learn's scaled gradients ``(raw + alpha W) / s`` gets the raw sums back from its own
    ``W``, ``alpha`` and batch size ``s``).  When ``J`` has full column rank — possible only while
    ``rows * units`` is at most the gradient count (:func:`injective_batch_limit`) — the map is injective
    and the recovery is **exact**: the party learns every row's ``delta``, as plain split learning
    tells it.  Beyond, the estimate is ``delta``'s orthogonal projection onto ``J``'s row space, a
    subspace of dimension at most the gradient count out of ``rows * units``.

    Parameters
    ----------
    jacobian : ndarray
        :func:`gradient_map` for the batch.
    gradients : ndarray
        The party's raw batch gradients, flattened as :func:`party_gradients`.
    rows, units : int
        The batch's row count and the interactive layer's width.

    Returns
    -------
    ndarray
        (rows, units): the estimate of ``delta``.
    """
    if jacobian.shape[1] != rows * units:
        raise ConfigurationError(f"the gradient map has {jacobian.shape[1]} columns for {rows} rows of "
                                 f"{units} units")
    solution, *_ = np.linalg.lstsq(jacobian, np.asarray(gradients, dtype=np.float64), rcond=None)
    return solution.reshape(rows, units)


def injective_batch_limit(param_count: int, units: int) -> int:
    """The largest batch at which a party's gradient map can be injective: ``param_count // units``.

    A batch of ``rows`` rows has ``rows * units`` unknowns in ``delta`` and the party sees
    ``param_count`` gradient entries; the map from one to the other can be injective (exact recovery by
    :func:`recover_deltas`) only when ``rows * units <= param_count``: above the limit, never.  The limit
    is an upper bound, reached with smooth activations (``tanh``, ``logistic``) when the party's last
    bottom layer is at least as wide as the interactive layer (a narrower one keeps, of each row's
    ``delta``, only the part ``delta W_k^T`` sees; with no bottom, the limit is the party's column count,
    the rank of its columns in the batch at most).  A ReLU layer is
    positively homogeneous, so each of its units ties its gradients by one linear relation (its incoming
    weights and intercept dotted with their gradients equal its outgoing weights dotted with theirs):
    ``J``'s rank is at most ``param_count`` minus the party's ReLU bottom units, and a given batch can
    fall lower still (a unit off in a row hides that row from the unit's gradients).  Whether a batch's
    map is injective is ``np.linalg.matrix_rank(J) == rows * units``.

    Parameters
    ----------
    param_count : int
        The feature party's parameter count: bottom weights and intercepts, and its block ``W_k``.
    units : int
        The interactive layer's width.
    """
    if param_count < 1 or units < 1:
        raise ConfigurationError(f"the gradient count and the interactive width must be positive, got "
                                 f"{param_count} and {units}")
    return param_count // units


def accumulated_delta_attack(batches, n_rows: int) -> np.ndarray:
    """Per row, a label score from a feature party's batch-summed gradients over many epochs.

    The linear models' mini-batch attack (docs/threat_model.md) on a split network: for each batch, the
    minimum-norm ``delta`` explaining the party's own summed gradients (:func:`recover_deltas`); every
    row's estimates projected on the estimates' first principal direction (one output's error times a
    direction shared by the rows: the label's sign) and summed over the epochs.  The sign of the scores
    is the attacker's to fix (one row of known label does it).

    Parameters
    ----------
    batches : iterable of (rows, jacobian, gradients)
        Per batch: its row indices, :func:`gradient_map` and the raw gradient sums the party learnt.
    n_rows : int

    Returns
    -------
    ndarray
        (n_rows,) scores.
    """
    estimates = []
    for rows, jacobian, gradients in batches:
        units = jacobian.shape[1] // len(rows)
        estimates.append((rows, recover_deltas(jacobian, gradients, len(rows), units)))
    stacked = np.concatenate([d for _, d in estimates])
    direction = np.linalg.svd(stacked - stacked.mean(axis=0), full_matrices=False)[2][0]
    scores = np.zeros(n_rows)
    for rows, d in estimates:
        scores[rows] += d @ direction
    return scores
