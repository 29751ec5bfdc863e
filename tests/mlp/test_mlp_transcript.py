"""What each party of a split-network run receives, read from the transcript, and the label attacks on it.

The docs (docs/mlp.md, "What each party learns") say a feature party never receives the gradient on
its bottom output, nor anything else from which a row's label follows.  Here: Li et al.'s norm attack,
which reads labels off plain split learning's per-row gradients (AUC near 1 on imbalanced data), is run on
every per-row array the feature party received in a vfl run, and fails (AUC near 0.5).
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from vfl.centralized.mlp import fit_mlp
from vfl.crypto import ring
from vfl.parties.mlp import initial_network, split_backward, split_forward
from vfl.parties.mlp.losses import output_delta
from vfl.protocols import Roster
from vfl.protocols.mlp import MLPSettings
from vfl.protocols.mlp.settings import batches
from vfl.runs import mlp as run
from vfl.runs.data import RoleData
from vfl.runs.threads import run_in_threads
from vfl.transport import Transcript


def _imbalanced(n=600, seed=2):
    rng = np.random.default_rng(seed)
    xa, xb = rng.normal(size=(n, 5)), rng.normal(size=(n, 3))
    y = ((xa[:, 0] + xb[:, 0] + 0.3 * rng.normal(size=n)) > 1.9).astype(int)      # about 8% positives
    return xa, xb, y


SETTINGS = MLPSettings(task="binary", hidden_layer_sizes=(4,), bottom_sizes={"A": (4,)}, activation="tanh",
                       batch_size=100, max_iter=2, tol=0.0, learning_rate_init=0.01, random_state=7)


def _run(xa, xb, y, transcript):
    roster = Roster(("A",), "B", "C")
    data = {"A": RoleData(list("abcde"), xa), "B": RoleData(list("fgh"), xb, labels=y)}
    return run_in_threads(roster, run.training_programs(data, SETTINGS, roster), transcript)


def test_the_norm_and_direction_attacks_read_the_labels_off_plain_split_learning():
    """The baseline the shared backward pass removes: plain split learning's per-row gradient on h_A.

    After 10 epochs on 11% positives: the norm attack's AUC 0.93 to 0.98, the direction attack's (the dot
    product with one known positive's gradient) 1.0.
    """
    xa, xb, y = _imbalanced()
    start = initial_network([5, 3], [(4,), ()], (4,), 1, "tanh")
    net = fit_mlp([xa, xb], y, start, task="binary", activation="tanh", batch_size=100, learning_rate_init=0.01,
                  max_iter=10)["network"]
    state = split_forward(net, [xa, xb], "tanh", "logistic")
    _, grad_h = split_backward(net, state, output_delta(y.reshape(-1, 1), state["top"][-1]), "tanh", "logistic")
    assert roc_auc_score(y, np.linalg.norm(grad_h[0], axis=1)) > 0.85          # measured 0.93 to 0.98 (secret starts)
    known_positive = grad_h[0][np.flatnonzero(y)[0]]
    assert roc_auc_score(y, grad_h[0] @ known_positive) > 0.95                               # measured 1.0


def test_a_feature_party_receives_only_masks_openings_and_shares_and_the_norm_attack_on_them_fails():
    xa, xb, y = _imbalanced()
    transcript = Transcript(keep_payloads=True)
    _run(xa, xb, y, transcript)
    received = [(s, m) for s, r, m in transcript.messages() if r == "A"]
    kinds = {(s, m.name, m.kind) for s, m in received}
    assert kinds == {("B", "plan", "public"), ("B", "opening", "masked"), ("B", "gradient_shares", "masked"),
                     ("B", "epoch", "public"), ("C", "triples", "masked")}
    # the per-row arrays A received from B: the openings of <delta> (rows x units) and of <Y>, <D> (rows x 4)
    rows_of = {}
    for epoch in range(SETTINGS.max_iter):
        for idx in batches(len(y), SETTINGS.batch_size, SETTINGS.random_state, epoch, True):
            rows_of.setdefault(epoch, []).append(idx)
    openings = [m for s, m in received if m.name == "opening"]
    rounds = 3                                            # a one-layer bottom: 2m + 1 rounds per batch
    assert len(openings) == rounds * sum(len(b) for b in rows_of.values())
    aucs = []
    flat_batches = [idx for epoch in range(SETTINGS.max_iter) for idx in rows_of[epoch]]
    for i, idx in enumerate(flat_batches):
        first = openings[rounds * i]
        # the round's first product is dW_A = h^T delta: B's factor is delta, its opening delta - R comes first
        delta_open = ring.from_bytes(first["values"][: ring.RING_BYTES * len(idx) * 4], (len(idx), 4))
        values = np.abs(ring.decode(delta_open, SETTINGS.frac_bits))
        labels = y[idx]
        if labels.min() != labels.max():
            aucs.append(roc_auc_score(labels, np.linalg.norm(np.log2(values + 1.0), axis=1)))
    assert len(aucs) >= 8
    assert 0.35 < float(np.mean(aucs)) < 0.65


def test_the_coordinator_receives_only_the_plan_and_the_verdicts():
    xa, xb, y = _imbalanced(n=300)
    transcript = Transcript(keep_payloads=True)
    _run(xa, xb, y, transcript)
    to_c = {(s, m.name, m.kind) for s, r, m in transcript.messages() if r == "C"}
    assert to_c == {("B", "plan", "public"), ("B", "epoch", "public")}
    plan = next(m for s, r, m in transcript.messages() if r == "C" and m.name == "plan")
    assert set(plan.fields) == {"rows", "validation_rows", "in_dims", "resume_from", "finished"}   # not the seed


def test_the_label_party_receives_only_the_sum_of_parts_openings_and_the_penalty():
    xa, xb, y = _imbalanced(n=300)
    transcript = Transcript(keep_payloads=True)
    _run(xa, xb, y, transcript)
    to_b = {(s, m.name, m.kind) for s, r, m in transcript.messages() if r == "B"}
    assert to_b == {("A", "widths", "public"), ("A", "part", "plaintext"), ("A", "opening", "masked"),
                    ("A", "penalty", "plaintext"), ("C", "triples", "masked")}
    widths = next(m for s, r, m in transcript.messages() if r == "B" and m.name == "widths")
    assert set(widths.fields) == {"rows", "columns", "out", "last_epoch"}


def test_at_prediction_the_label_party_gets_only_the_sum_of_two_feature_parties_parts():
    """Batch prediction with two feature parties: the coordinator's masks sum to zero, so the parts' sum is exact;
    each part reaches the label party under a mask uniform over the ring (about half its entries above 2^255),
    while the part itself, unmasked, is a small fixed-point number."""
    import pandas as pd

    import vfl.neural_network as network
    from vfl import VerticalDataset, VerticalMLPClassifier

    rng = np.random.default_rng(0)
    x_a, x_c, x_b = rng.normal(size=(200, 3)), rng.normal(size=(200, 3)), rng.normal(size=(200, 2))
    y = (x_b[:, 0] + x_a[:, 0] - x_c[:, 1] > 0).astype(int)
    data = VerticalDataset({"A": pd.DataFrame(x_a).add_prefix("a"), "A2": pd.DataFrame(x_c).add_prefix("c"),
                            "B": pd.DataFrame(x_b).add_prefix("b").assign(y=y)}, label="y")
    with pytest.warns(Warning):
        model = VerticalMLPClassifier(hidden_layer_sizes=(4,), bottom_sizes=(4,), batch_size=100, max_iter=2,
                                      allow_reconstruction=list(data.feature_parties)).fit(data)
    transcript, run_threads = Transcript(keep_payloads=True), network.run_in_threads
    network.run_in_threads = lambda roster, programs, _=None, **kw: run_threads(roster, programs, transcript, **kw)
    try:
        model.predict_proba(data)
    finally:
        network.run_in_threads = run_threads
    by = {(sender, to, m.name): m for sender, to, m in transcript.messages()}
    assert {k for k in by if k[1] == "B"} == {("A", "B", "predict"), ("A2", "B", "predict"), ("A", "B", "part"),
                                              ("A2", "B", "part")}
    values = lambda m: ring.from_bytes(m["values"], (len(m["values"]) // ring.RING_BYTES,))
    masks = {k: values(by[("coordinator", k, "part_mask")]) for k in ("A", "A2")}
    assert all(v == 0 for v in ring.reduce(masks["A"] + masks["A2"]))                 # the masks cancel in the sum
    for k in ("A", "A2"):
        sent = values(by[(k, "B", "part")])
        assert by[(k, "B", "part")].kind == "masked" and 0.35 < np.mean([v >> 255 for v in sent]) < 0.65
        part = ring.reduce(sent - masks[k])
        assert all(min(v, (1 << ring.RING_BITS) - v) < 1 << 120 for v in part)       # small once unmasked
