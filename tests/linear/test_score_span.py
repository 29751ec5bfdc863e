"""The label party recovering a feature party's rows from its per-row scores, and the refusal that stops it.

B learns the scores of the rows it predicts; removing its own part leaves ``S = X_A W_A^T + c``,
one column per score (``c``: the offset A's standardization adds).  With as many scores ``K``
as A has columns ``m`` (one-vs-rest with ``K >= m`` classes, or one score and a one-column
party), ``W_A`` has full column rank: knowing ``m + 1`` of A's rows, B solves for ``W_A`` and
``c`` and then for every other row, exactly.
vfl refuses such a model unless the feature party opts in (``allow_score_span``).
"""

import json

import numpy as np
import pandas as pd
import pytest

from vfl import ConfigurationError, DataError, VerticalDataset, VerticalLogisticRegression

FAST = dict(key_bits=1024, insecure=True, max_iter=3, tol=None, learning_rate=0.3)


def classes_data(n_rows, n_a, n_classes, seed):
    rng = np.random.default_rng(seed)
    x_a, x_b = rng.normal(size=(n_rows, n_a)), rng.normal(size=(n_rows, 2))
    z = np.hstack([x_a, x_b]) @ rng.normal(size=(n_a + 2, n_classes))
    label = np.argmax(z, axis=1)
    label[:n_classes] = np.arange(n_classes)                       # every class present
    frames = {"A": pd.DataFrame(x_a).add_prefix("a"), "B": pd.DataFrame(x_b).add_prefix("b").assign(y=label)}
    return VerticalDataset(frames, label="y"), x_a, x_b


def scores_seen_by_b(model, x_b, test):
    """What B holds after predicting ``test``: each row's scores minus its own part (``X_A W_A^T + c``)."""
    z = np.atleast_2d(model.decision_function(test).T).T
    own = (x_b - model.mean_["B"]) / model.scale_["B"] @ np.atleast_2d(model.coef_["B"]).T + model.intercept_
    return z - own


def recover_rows(s, x_known):
    """B knows A's first ``m + 1`` rows: solve ``[x_known, 1] [W^T; c] = s[:m+1]``, then every row from ``s``."""
    known = len(x_known)
    w_c = np.linalg.lstsq(np.hstack([x_known, np.ones((known, 1))]), s[:known], rcond=None)[0]
    return (s - w_c[-1]) @ np.linalg.pinv(w_c[:-1])


def test_b_recovers_a_rows_exactly_when_a_opted_in():
    train, _, _ = classes_data(90, n_a=3, n_classes=4, seed=0)
    model = VerticalLogisticRegression(allow_score_span=["A"], **FAST).fit(train)
    test, x_a, x_b = classes_data(40, n_a=3, n_classes=4, seed=1)
    recovered = recover_rows(scores_seen_by_b(model, x_b, test), x_a[:4])
    assert np.allclose(recovered, x_a, atol=1e-5)                    # every row of A, to fixed-point precision


def test_fewer_scores_than_columns_leave_b_a_projection_only():
    train, _, _ = classes_data(90, n_a=5, n_classes=3, seed=2)
    model = VerticalLogisticRegression(**FAST).fit(train)               # 3 scores < 5 columns: allowed
    test, x_a, x_b = classes_data(40, n_a=5, n_classes=3, seed=3)
    recovered = recover_rows(scores_seen_by_b(model, x_b, test), x_a[:6])
    assert np.abs(recovered - x_a)[6:].max() > 0.5                     # the same attack recovers nothing exact


@pytest.mark.parametrize("n_a,n_classes", [(3, 3), (2, 4), (1, 2)])
def test_as_many_scores_as_columns_is_refused_without_the_opt_in(n_a, n_classes):
    train, _, _ = classes_data(60, n_a=n_a, n_classes=n_classes, seed=4)
    model = VerticalLogisticRegression(**FAST)
    with pytest.raises(ConfigurationError, match=r"party A: the model gives the label party B .* per predicted "
                                                 r"row, not fewer than the rank \d of A's \d column.*allow_score_span=\['A'\]"):
        model.fit(train)
    assert not hasattr(model, "coef_")


def test_prediction_checks_the_opt_in_again():
    train, _, _ = classes_data(60, n_a=3, n_classes=3, seed=5)
    model = VerticalLogisticRegression(allow_score_span=["A"], **FAST).fit(train)
    model.set_params(allow_score_span=None)
    with pytest.raises(ConfigurationError, match="could recover A's rows"):
        model.predict(train)


@pytest.mark.parametrize("value", ["A", ["Z"], [1]])
def test_the_opt_in_names_feature_parties(value):
    train, _, _ = classes_data(60, n_a=3, n_classes=3, seed=6)
    with pytest.raises(ConfigurationError, match="allow_score_span"):
        VerticalLogisticRegression(allow_score_span=value, **FAST).fit(train)


# -- the rule counts what a party revealed in total: the rank of its columns, every model, every version ----------

def recover_affine(s, s_known, x_known):
    """B knows a few of A's rows and their scores: every row is the affine combination of the known rows that
    gives its scores (the scores are affine in the row), whatever the rank of A's columns."""
    steps, targets = x_known[1:] - x_known[0], s_known[1:] - s_known[0]
    weights = np.linalg.lstsq(np.atleast_2d(targets.T).reshape(-1, len(targets)),
                              np.atleast_2d((s - s_known[0]).T).reshape(-1, len(s)), rcond=None)[0]
    return x_known[0] + weights.T @ steps


def dependent_data(kind, n_rows, seed):
    """A's columns of a lower rank than their count: a duplicated column, one quantity in two units (rank 1 of
    2, a binary model), or a derived column ``a3 = a0 + a1`` (rank 3 of 4, three classes); B two columns."""
    rng = np.random.default_rng(seed)
    base, x_b = rng.normal(size=(n_rows, 3)), rng.normal(size=(n_rows, 2))
    if kind == "duplicated":
        x_a = np.column_stack([base[:, 0], base[:, 0]])
    elif kind == "two units":
        height_cm = 170 + 10 * base[:, 0]
        x_a = np.column_stack([height_cm, height_cm / 2.54])
    else:
        x_a = np.column_stack([base, base[:, 0] + base[:, 1]])
    n_classes = 3 if kind == "derived" else 2
    z = np.hstack([base, x_b]) @ rng.normal(size=(5, n_classes))
    label = np.argmax(z, axis=1)
    label[:n_classes] = np.arange(n_classes)
    frames = {"A": pd.DataFrame(x_a).add_prefix("a"), "B": pd.DataFrame(x_b).add_prefix("b").assign(y=label)}
    return VerticalDataset(frames, label="y"), x_a, x_b


@pytest.mark.parametrize("kind,rank", [("duplicated", 1), ("two units", 1), ("derived", 3)])
def test_b_recovers_a_rank_deficient_party_from_fewer_scores_than_columns_once_it_opted_in(kind, rank):
    train, x_train, _ = dependent_data(kind, 120, seed=10)
    model = VerticalLogisticRegression(allow_score_span=["A"], **FAST).fit(train)
    n_scores = len(np.atleast_1d(model.intercept_))
    assert n_scores < x_train.shape[1]                     # what the rule counted before: columns, not rank
    test, x_a, x_b = dependent_data(kind, 40, seed=11)
    s = scores_seen_by_b(model, x_b, test)
    recovered = recover_affine(s, s[:rank + 1], x_a[:rank + 1])
    assert np.abs(recovered - x_a).max() / x_a.std() < 1e-4         # every row of A, to fixed-point precision


@pytest.mark.parametrize("kind,columns,rank", [("duplicated", 2, 1), ("two units", 2, 1), ("derived", 4, 3)])
def test_a_party_s_rank_not_its_column_count_is_what_the_rule_counts(kind, columns, rank):
    train, _, _ = dependent_data(kind, 120, seed=12)
    model = VerticalLogisticRegression(**FAST)
    with pytest.raises(ConfigurationError, match=rf"party A: the model gives the label party B .* not fewer than "
                                                 rf"the rank {rank} of A's {columns} column\(s\).*allow_score_span"):
        model.fit(train)
    assert not hasattr(model, "coef_")


def three_label_frames(n_rows, seed):
    """A's three columns; B's two columns and three label columns of its own (30 days, 90 days, churn)."""
    rng = np.random.default_rng(seed)
    x_a, x_b = rng.normal(size=(n_rows, 3)), rng.normal(size=(n_rows, 2))
    z = np.hstack([x_a, x_b]) @ rng.normal(size=(5, 3)) + rng.normal(scale=0.3, size=(n_rows, 3))
    labels = pd.DataFrame((z > 0).astype(int), columns=["default30", "default90", "churn"])
    return pd.DataFrame(x_a).add_prefix("a"), pd.DataFrame(x_b).add_prefix("b").join(labels), x_a, x_b


def one_label(frame_a, frame_b, label):
    others = [c for c in ("default30", "default90", "churn") if c != label]
    return VerticalDataset({"A": frame_a, "B": frame_b.drop(columns=others)}, label=label)


def test_three_binary_models_on_three_labels_give_b_every_row_once_a_opted_in():
    frame_a, frame_b, _, _ = three_label_frames(120, seed=20)
    test_a, test_b, x_a, x_b = three_label_frames(40, seed=21)
    spans = []
    for label in ("default30", "default90", "churn"):          # each alone: 1 score against 3 columns
        model = VerticalLogisticRegression(allow_score_span=["A"], **FAST).fit(one_label(frame_a, frame_b, label))
        spans.append(scores_seen_by_b(model, x_b, one_label(test_a, test_b, label)))
    s = np.hstack(spans)
    assert np.abs(recover_affine(s, s[:4], x_a[:4]) - x_a).max() < 1e-4
    two = np.hstack(spans[:2])                                   # two models: a projection, no row
    assert np.abs(recover_affine(two, two[:4], x_a[:4]) - x_a).max() > 0.1


def test_the_third_model_with_the_same_label_party_is_refused():
    frame_a, frame_b, _, _ = three_label_frames(120, seed=22)
    for label in ("default30", "default90"):
        model = VerticalLogisticRegression(**FAST).fit(one_label(frame_a, frame_b, label))
        model.predict(one_label(frame_a, frame_b, label))
    third = VerticalLogisticRegression(**FAST)
    with pytest.raises(ConfigurationError, match=r"party A: .* one score per predicted row and A's earlier "
                                                 r"models with B 2 more \(its score-span ledger\), not fewer than "
                                                 r"the rank 3 .*allow_score_span=\['A'\]"):
        third.fit(one_label(frame_a, frame_b, "churn"))
    # another party data set (other rows of A) starts a ledger of its own
    other_a, other_b, _, _ = three_label_frames(120, seed=23)
    VerticalLogisticRegression(**FAST).fit(one_label(other_a, other_b, "churn"))


def test_prediction_checks_the_ledger_too():
    """Three models fitted and used with A's opt-in (the ledger records each at its prediction), then the opt-in
    withdrawn from the first: with the two others it spans A's rows, and A refuses its next prediction."""
    frame_a, frame_b, _, _ = three_label_frames(120, seed=24)
    models = []
    for label in ("default30", "default90", "churn"):
        models.append(VerticalLogisticRegression(allow_score_span=["A"], **FAST).fit(one_label(frame_a, frame_b, label)))
        models[-1].predict(one_label(frame_a, frame_b, label))
    models[0].set_params(allow_score_span=None)
    with pytest.raises(ConfigurationError, match="and A's earlier models with B 2 more"):
        models[0].predict(one_label(frame_a, frame_b, "default30"))


def test_a_party_s_ledger_on_disk_is_readable_json_that_counts_every_model_once(tmp_path):
    from vfl.protocols.span import LEDGER_FILE, SpanLedger, check_release, check_training, model_name

    ledger, how = SpanLedger.at(tmp_path, "A"), "allow_score_span = true"
    columns = ["a0", "a1", "a2"]
    check_training(ledger, "B", columns, 3, 1, "run1", False, how)
    first = np.array([[1.0, 2.0, 0.5]])
    for _ in range(2):                        # the same version served twice, and the same direction rescaled
        check_release(ledger, "B", columns, first, 1, model_name(first, "v1"), False, how)
    check_release(ledger, "B", columns, 3 * first, 1, model_name(3 * first, "v2"), False, how)
    second = np.array([[0.0, 1.0, -1.0]])
    check_release(ledger, "B", columns, second, 1, model_name(second, "v3"), False, how)
    saved = json.loads((tmp_path / LEDGER_FILE).read_text())
    assert saved["format"] == "vfl-score-span-ledger/1" and saved["ranks"] == [{"columns": columns, "rank": 3}]
    assert len(saved["models"]) == 3 and all(m["label_party"] == "B" for m in saved["models"])
    third = np.array([[1.0, 0.0, 0.0]])
    with pytest.raises(ConfigurationError, match=r"party A: .* and A's earlier models with B 2 more "
                                                 r"\(its score-span ledger\), not fewer than the rank 3"):
        check_release(SpanLedger.at(tmp_path, "A"), "B", columns, third, 1, model_name(third, "v4"), False, how)
    with pytest.raises(ConfigurationError, match="rank 3"):            # before training: one more score is one too many
        check_training(SpanLedger.at(tmp_path, "A"), "B", columns, 3, 1, "run2", False, how)
    check_release(ledger, "C", columns, third, 1, "v4", False, how)     # another label party: a ledger of its own
    check_release(ledger, "B", columns, third, 1, "v4", True, how)      # the opt-in: accepted, and recorded
    assert len(json.loads((tmp_path / LEDGER_FILE).read_text())["models"]) == 5
    (tmp_path / LEDGER_FILE).write_text("{not json")
    with pytest.raises(DataError, match="score-span ledger .* cannot be read"):
        check_release(ledger, "B", columns, first, 1, "v1", False, how)


def test_a_party_with_no_varying_column_has_nothing_to_reveal():
    from vfl.protocols.span import column_rank

    assert column_rank(np.ones((10, 2))) == 0 and column_rank(np.zeros((10, 0))) == 0
    x = np.random.default_rng(0).normal(size=(50, 3))
    assert column_rank(x) == 3 and column_rank(np.column_stack([x, x[:, 0] - 2 * x[:, 1]])) == 3
    assert column_rank(np.column_stack([x[:, 0], x[:, 0] + 1e-9 * x[:, 1]])) == 1       # below the tolerance
    assert column_rank(np.column_stack([x[:, 0], x[:, 0] + 1e-3 * x[:, 1]])) == 2
