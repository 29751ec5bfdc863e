"""A party's arithmetic of explanations: contributions of its own columns, party-level Shapley values, reasons.

Every family's explanation ends in the same numbers (:mod:`vfl.protocols.explain`
carries them, each family's run computes them):

* **Additive models** (linear and logistic regression, the scorecard's logistic
  model): a column's contribution to a row's score is ``w_j (x_j - mean_j)`` in the
  model's own units (after standardization, or on WOE values or bin indicators) —
  the interventional Shapley value against the training mean.  Each party computes
  its own (:func:`additive_contributions`); a feature party's *total* is its partial
  score less its training mean's.
* **Trees and networks**: the K parties are the players; the value of a coalition
  ``S`` is the model's raw score with the parties outside ``S`` marginalised (trees:
  by the training cover, :func:`tree_coalition_values`; networks: the absent party's
  bottom input at its training mean).  :func:`party_shapley` is the exact Shapley
  value over all ``2^K`` coalitions.
* **Reasons** (:func:`rank_reasons`): the largest contributions toward the adverse
  outcome, each a code.

Nothing here imports a family: the families' runs call it with their own numbers.
"""

from __future__ import annotations

from itertools import combinations
from math import factorial

import numpy as np

from vfl.errors import ConfigurationError, DataError

#: The most parties whose coalitions are enumerated (2^K of them).
MAX_PLAYERS = 5


# ------------------------------------------------------------------------------------------- additive models

def additive_contributions(x, weights, reference) -> np.ndarray:
    """Per row and column, ``w_j (x_j - reference_j)`` (rows, columns): the interventional Shapley values of an
    additive model against the reference row (the training mean), in the model's units."""
    x = np.asarray(x, dtype=np.float64)
    w = np.ravel(np.asarray(weights, dtype=np.float64))[:x.shape[1]]
    return (x - np.asarray(reference, dtype=np.float64)) * w


def grouped(contributions, groups) -> tuple[list[str], np.ndarray]:
    """Columns' contributions summed by ``groups`` (one name per column, kept in first-seen order): a scorecard's
    bin indicators of one column become that column's contribution."""
    contributions = np.asarray(contributions, dtype=np.float64)
    names = list(dict.fromkeys(groups))
    out = np.zeros((len(contributions), len(names)))
    for j, name in enumerate(groups):
        out[:, names.index(name)] += contributions[:, j]
    return names, out


# ------------------------------------------------------------------------------------------- Shapley over parties

def check_players(players) -> list[str]:
    players = list(players)
    if not 1 <= len(players) <= MAX_PLAYERS:
        raise ConfigurationError(f"party-level Shapley values enumerate every coalition of the parties: at most "
                                 f"{MAX_PLAYERS} parties, got {len(players)} ({players})")
    return players


def coalitions(n_players: int) -> list[tuple[int, ...]]:
    """Every subset of ``range(n_players)``, as sorted tuples, smallest first."""
    return [c for size in range(n_players + 1) for c in combinations(range(n_players), size)]


def party_shapley(values: dict, n_players: int) -> np.ndarray:
    """Exact Shapley values (rows, players) from ``values[coalition]`` (rows,) for every coalition of
    :func:`coalitions`: ``phi_i = sum_S |S|! (K - |S| - 1)! / K! (v(S + i) - v(S))``."""
    missing = [c for c in coalitions(n_players) if c not in values]
    if missing:
        raise DataError(f"party-level Shapley values need every coalition's value; {missing[0]} is missing")
    rows = len(np.atleast_1d(values[()]))
    out = np.zeros((rows, n_players))
    total = factorial(n_players)
    for i in range(n_players):
        for coalition in coalitions(n_players):
            if i in coalition:
                continue
            weight = factorial(len(coalition)) * factorial(n_players - len(coalition) - 1) / total
            joined = tuple(sorted(coalition + (i,)))
            out[:, i] += weight * (np.asarray(values[joined], dtype=np.float64)
                                   - np.asarray(values[coalition], dtype=np.float64))
    return out


# ------------------------------------------------------------------------------------------- trees

def leaf_paths(left, right) -> list[list[tuple[int, bool]]]:
    """For each leaf (ascending node id), the path from the root: ``(node, went_left)`` per split."""
    left, right = np.asarray(left), np.asarray(right)
    paths, stack = {}, [(0, [])]
    while stack:
        node, path = stack.pop()
        if left[node] < 0:
            paths[node] = path
            continue
        stack.append((int(left[node]), path + [(node, True)]))
        stack.append((int(right[node]), path + [(node, False)]))
    return [paths[leaf] for leaf in sorted(paths)]


def node_counts(left, right, leaf_counts) -> np.ndarray:
    """Training rows reaching every node, from the rows of each leaf (leaves in ascending node id)."""
    left = np.asarray(left)
    counts = np.zeros(len(left))
    leaf_counts = np.asarray(leaf_counts, dtype=np.float64)
    for at, (leaf, path) in enumerate(zip(np.flatnonzero(left < 0), leaf_paths(left, right))):
        counts[leaf] += leaf_counts[at]
        for node, _ in path:
            counts[node] += leaf_counts[at]
    return counts


def cover_products(left, right, owner, leaf_counts, n_players: int) -> np.ndarray:
    """Per player and leaf (players, leaves): the product, over the player's splits on the leaf's path, of the
    training share of rows taking the leaf's side — the weight of that leaf when the player is absent."""
    counts = node_counts(left, right, leaf_counts)
    paths = leaf_paths(left, right)
    out = np.ones((n_players, len(paths)))
    for at, path in enumerate(paths):
        for node, went_left in path:
            child = left[node] if went_left else right[node]
            share = counts[child] / counts[node] if counts[node] > 0 else 0.5
            out[int(owner[node]), at] *= share
    return out


def tree_coalition_values(leaf_values, masks, covers) -> dict:
    """One tree's value of every coalition per row: ``sum_leaf value * prod_{k in S} mask_k * prod_{k not in S}
    cover_k`` — the tree's output with the absent parties' splits replaced by their training cover.

    ``masks[k]`` (rows, leaves) are the leaves party ``k``'s splits allow for each row (the private prediction's
    masks); ``covers`` (players, leaves) from :func:`cover_products`.
    """
    n_players = len(masks)
    leaf_values = np.asarray(leaf_values, dtype=np.float64)
    out = {}
    for coalition in coalitions(n_players):
        weight = np.ones((len(masks[0]), len(leaf_values)))
        for k in range(n_players):
            weight = weight * (masks[k] if k in coalition else covers[k][None, :])
        out[coalition] = weight @ leaf_values
    return out


# ------------------------------------------------------------------------------------------- reasons

def rank_reasons(contributions, codes, k: int, sign: float) -> list[list[str]]:
    """Per row, the codes of the ``k`` largest contributions toward the adverse outcome (``sign * value > 0``,
    largest first).

    ``contributions`` (rows, units) in the score's units; ``codes`` per row and unit (rows, units) of str, or
    one list of str per unit (the same for every row).
    """
    values = sign * np.asarray(contributions, dtype=np.float64)
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ConfigurationError(f"k must be a positive integer (reasons per row), got {k!r}")
    order = np.argsort(-values, axis=1, kind="stable")[:, :k]
    fixed = np.ndim(codes) == 1
    out = []
    for row in range(len(values)):
        picked = [j for j in order[row] if values[row, j] > 0]
        out.append([str(codes[j] if fixed else codes[row][j]) for j in picked])
    return out


def party_code(party: str) -> str:
    """What a reason names when the party did not consent to name its column (or has no columns to name)."""
    return f"information from {party}"
