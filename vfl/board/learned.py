"""What a party learned in a run: the messages it received, by step, beside what the docs say its role learns.

What each message carries is read from the protocols' own tables, by family and sender
(:func:`vfl.deploy.narration.description`).  The statements are the docs' tables in one line each
(README threat model, docs/threat_model.md, docs/trees.md, docs/mlp.md, docs/credit_scoring.md,
docs/psi.md, docs/serving.md), where the board shows them beside the messages themselves.
"""

from __future__ import annotations

from vfl.board.runs import step_of
from vfl.deploy.narration import NOT_DESCRIBED, description

#: What each role learns, per family: (learns, does not learn, the doc that says more).
STATEMENTS = {
    ("linear", "feature"): (
        "its own weights; per batch its gradient X_k^T d (one number per weight); with mini-batches and no DP, "
        "most of the label party's labels (measured: docs/threat_model.md)",
        "with full batches or DP, the labels beyond what its own columns predict; the label party's columns, "
        "scores or weights; any other feature party's; the coordinator's key",
        "docs/threat_model.md"),
    ("linear", "label"): (
        "its own weights and intercept; per batch X_B^T d; the scores it predicts",
        "the feature parties' columns, scores or weights (while what each revealed stays below its rank); "
        "the coordinator's key",
        "docs/threat_model.md"),
    ("linear", "coordinator"): (
        "the loss of each batch (one number summed over its rows); with conjugate gradient, per step, sums over "
        "every party and row",
        "anything per row; any weight or gradient: what it decrypts for them is a uniformly random residue",
        "docs/threat_model.md"),
    ("trees", "feature"): (
        "the rows of every node of every tree it takes part in (hidden with hide_membership=True); the tree "
        "shapes; its own splits; when early stopping stopped",
        "any gradient, hessian, label, leaf value or another party's column: everything about them is a "
        "ciphertext under the label party's key",
        "docs/trees.md"),
    ("trees", "label"): (
        "per evaluated node, the left sums of each feature party's candidates (shuffled per tree); at each "
        "feature-party split, which rows go left and the split's column index",
        "a feature party's feature values or thresholds",
        "docs/trees.md"),
    ("mlp", "feature"): (
        "its own gradients summed over each batch; the batch's rows; whether to stop",
        "delta or delta W_k^T of any row; any other party's output, weights or gradients; with dp_epsilon, the "
        "labels beyond the DP guarantee",
        "docs/mlp.md"),
    ("mlp", "label"): (
        "the sum of the feature parties' parts of the interactive layer per row (one feature party: its part); "
        "each feature party's sum of squared weights per epoch",
        "a feature party's columns, bottom output, weights or gradients",
        "docs/mlp.md"),
    ("mlp", "coordinator"): (
        "the batch shapes; whether to stop",
        "anything but shapes: it sends triples and masks and receives only the plan and the verdicts",
        "docs/mlp.md"),
    ("credit", "feature"): (
        "which of its own columns are selected (with share_woe: its bins' WOE values and IVs, i.e. each bin's "
        "event rate); its own weights and per-step gradient; its own points, so how its bins rank by risk",
        "a label; the label party's columns, bins or points; another feature party's anything",
        "docs/credit_scoring.md"),
    ("credit", "label"): (
        "per feature-party column the number of bins and the rows and events of every bin, in an order it "
        "cannot map to values (so WOE and IV); every party's selected columns; each row's score",
        "a feature party's values, thresholds, or which rows fall in which of its bins",
        "docs/credit_scoring.md"),
    ("credit", "coordinator"): (
        "the loss of each step of the model",
        "anything per row; any weight or gradient",
        "docs/credit_scoring.md"),
    ("alignment", "feature"): (
        "every party's row count and the size of the intersection; which of its own rows are in it",
        "any id of another party outside the intersection",
        "docs/psi.md"),
    ("alignment", "label"): (
        "every party's row count and the size of the intersection; which of its own rows are in it (the hub: "
        "per feature party, its pairwise intersection)",
        "any id of another party outside the intersection",
        "docs/psi.md"),
    ("serving", "feature"): (
        "with private queries (the default), the number of ids of each round and when, not which ids; by id, "
        "the ids it is sent",
        "any score, label, leaf or the label party's features",
        "docs/serving.md"),
    ("serving", "label"): (
        "the ids it is asked, the score of every id, which of the ids each feature party holds",
        "a feature party's columns, rows or partial scores",
        "docs/serving.md"),
    ("serving", "coordinator"): (
        "the number of values per round; for each ciphertext a uniform residue",
        "ids, scores, any party's features or parts",
        "docs/serving.md"),
}

#: What each message kind says about the values it carries.
KINDS = {
    "ciphertext": "Paillier-encrypted: nothing without the key",
    "masked": "decrypted, but hidden by a random mask only the sender can remove",
    "public": "harmless in clear (counts, shapes, settings)",
    "plaintext": "values in clear that are not public: read the docs' table",
}


def statement(family: str, role: str, task: str = "train") -> tuple[str, str, str] | None:
    """What ``role`` learns in a run of ``family`` (prediction runs: the family's prediction, as in training; an
    export exchanges no message: none)."""
    return None if task == "export" else STATEMENTS.get((family, role))


def received(groups: dict, family: str, parties: dict, task: str = "train") -> list[dict]:
    """The messages this party received (``groups``: :attr:`vfl.board.runs.Live.received`), described.

    ``parties`` maps each party's name to its role (``run.json``): a message is described by its sender's
    role in the family's table (:func:`vfl.deploy.narration.description`); one no table describes says so.
    Each group: ``step``, ``name``, ``peer``, ``kind``, ``count``, ``bytes`` and ``what`` (the description).
    """
    return [{"step": step_of(name, task), "name": name, "peer": peer, "kind": kind, "count": count, "bytes": nbytes,
             "what": description(family, parties.get(peer, ""), name, task) or NOT_DESCRIBED}
            for (name, peer, kind), (count, nbytes) in groups.items()]
