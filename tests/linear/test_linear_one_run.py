"""One run per role (vfl.runs.linear): the estimator and ``vfl party`` give the same models and the same refusals.

The same CSVs train once through :class:`~vfl.linear_model.VerticalLogisticRegression`
(every role in a thread of this process) and once through three ``vfl party``
processes over TLS (with private set intersection); the settings of the estimator
are those the processes read from their ``federation.toml``.  Full batches from a
zero start make the model independent of the row order, so the two must agree to
the last digits.  The same bad inputs are then refused by both with the same error
type (the exit code 2 of bad input) and the same message, whichever party finds it.
"""

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from vfl.protocols.release import ReleaseWarning
from vfl import VerticalDataset
from vfl.deploy.config import load_config
from vfl.errors import ConfigurationError, DataError
from vfl.linear_model import VerticalLogisticRegression
from vfl_net_helpers import (_free_ports, assert_succeeded, federation_certs,  # noqa: F401 - fixture
                             run_parties, write_federation_file)

pytestmark = pytest.mark.slow    # processes and TLS links

TRAINING = {"iterations": 4, "batch_size": 0, "init": "zeros", "solver": "gd", "learning_rate": 0.4}
CLASSES = ["high", "low", "mid"]


def write_data(folder, classes, weights=None, n_rows=60, seed=5):
    """A: 3 columns; B: 2 columns, a label of ``classes`` and (``weights``) row weights ``w``; each CSV in its
    own row order.  ``weights="zero"`` makes every weight 0."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n_rows, 5))
    z = x @ rng.normal(size=(5, len(classes)))
    label = np.array(classes)[np.argmax(z + rng.normal(scale=0.3, size=z.shape), axis=1)]
    ids = [f"r{i:03d}" for i in range(n_rows)]
    frames = {"A": pd.DataFrame(x[:, :3], columns=["a0", "a1", "a2"]).assign(id=ids),
              "B": pd.DataFrame(x[:, 3:], columns=["b0", "b1"]).assign(id=ids, label=label)}
    if weights:
        frames["B"]["w"] = 0.0 if weights == "zero" else rng.uniform(0.5, 2.0, size=n_rows)
    paths = {}
    for role, frame in frames.items():
        paths[(role, "train")] = folder / f"{role}_train.csv"
        frame.iloc[rng.permutation(n_rows)].to_csv(paths[(role, "train")], index=False)
    return paths


@pytest.fixture
def both(tmp_path, federation_certs):  # noqa: F811 - the fixture of vfl_net_helpers
    """Train through both paths: ``run(classes, training, allow_span, weights)`` -> (estimator outcome, processes)."""
    def run(classes, training=None, allow_span=False, weights=False, name="run"):
        folder = tmp_path / name
        folder.mkdir()
        data = write_data(folder, classes, weights)
        config = write_federation_file(folder / "federation.toml", federation_certs[0], _free_ports(3),
                                       {**TRAINING, **(training or {})},
                                       data={"sample_weight": "w"} if weights else None,
                                       party_options={"A": {"allow_score_span": True}} if allow_span else None)
        model = estimator(config, allow_span)
        dataset, sample_weight = dataset_of(data, weights)
        try:
            outcome = model.fit(dataset, sample_weight=sample_weight)
        except (ConfigurationError, DataError) as exc:
            outcome = exc
        processes = run_parties("party", config, data, folder / "work")
        ids = sorted(pd.read_csv(data[("A", "train")], dtype={"id": str})["id"])     # the estimator's row order
        run.last = {"config": config, "data": data, "dataset": dataset, "ids": ids}
        return outcome, processes, folder / "work"
    return run


def estimator(config, allow_span: bool) -> VerticalLogisticRegression:
    """The estimator with the settings ``vfl party`` reads from ``config``."""
    settings = load_config(config).training
    names = VerticalLogisticRegression().get_params()
    params = {f.name: getattr(settings, f.name) for f in dataclasses.fields(settings) if f.name in names}
    return VerticalLogisticRegression(**params, allow_score_span=["A"] if allow_span else None, n_jobs=1)


def dataset_of(data, weights: bool):
    """The CSVs as the estimator takes them: rows in one order, the row weights apart."""
    a = pd.read_csv(data[("A", "train")], dtype={"id": str}).sort_values("id").set_index("id")
    b = pd.read_csv(data[("B", "train")], dtype={"id": str}).sort_values("id").set_index("id")
    if not weights:
        return VerticalDataset({"A": a, "B": b}, label="label"), None
    return VerticalDataset({"A": a, "B": b.drop(columns="w")}, label="label"), b["w"].to_numpy()


def shard(work, role):
    return json.loads((work / role / f"model_{role}.json").read_text())


def error_line(processes, role, command="party"):
    """The message party ``role`` printed on failing (``vfl COMMAND ROLE: error: MESSAGE``) and its exit code."""
    code, _, err = processes[role]
    prefix = f"vfl {command} {role}: error: "
    lines = [line[len(prefix):] for line in err.splitlines() if line.startswith(prefix)]
    assert lines, err
    return code, lines[0]


@pytest.mark.parametrize("classes, weights", [(["no", "yes"], False), (CLASSES, True)], ids=["binary", "ovr"])
def test_the_same_model_through_both_paths(both, classes, weights):
    model, processes, work = both(classes, {"class_weight": "balanced"} if weights else None,
                                  allow_span=len(classes) > 2, weights=weights)
    assert_succeeded(processes)
    a, b = shard(work, "A"), shard(work, "B")
    np.testing.assert_allclose(np.array(a["coef"]), model.coef_["A"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.array(b["coef"]), model.coef_["B"], rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.array(b["intercept"]), model.intercept_, rtol=0, atol=1e-12)
    assert b["classes"] == model.classes_.tolist()
    assert json.loads((work / "C" / "training_C.json").read_text())["epochs"] == np.asarray(model.n_iter_).tolist()
    # prediction: vfl predict on the training CSVs scores every row as the estimator does
    last = both.last
    assert_succeeded(run_parties("predict", last["config"], last["data"], work, split="train"))
    scores = pd.read_csv(work / "B" / "scores.csv", dtype={"id": str}).set_index("id").loc[last["ids"]]
    named = ["score"] if len(classes) == 2 else [f"score_{c}" for c in classes]
    expected = model.decision_function(last["dataset"])
    np.testing.assert_allclose(scores[named].to_numpy().reshape(expected.shape), expected, rtol=0, atol=1e-9)


BAD = {
    # every data party checks every party's batch size on the shared column counts: the same message
    "batch smaller than a party's gradient": (["no", "yes"], {"batch_size": 3}, False, ("A", "B")),
    # before: the estimator named validation_fraction, vfl party the batch size it left
    "validation split leaves too few rows": (["no", "yes"], {"early_stopping": True, "validation_fraction": 0.96},
                                             False, ("A", "B")),
    "one class only": (["yes"], None, False, ("B",)),
    "every row weight zero": (["no", "yes"], None, "zero", ("B",)),
}


@pytest.mark.parametrize("case", list(BAD))
def test_the_same_refusal_through_both_paths(both, case):
    classes, training, weights, finders = BAD[case]
    refused, processes, _ = both(classes, training, weights=weights, name=case.replace(" ", "-"))
    assert isinstance(refused, (ConfigurationError, DataError)), refused
    for role in finders:
        code, message = error_line(processes, role)
        assert (code, message) == (2, str(refused))


def test_the_release_refusal_names_each_face_s_own_consent(both):
    """A (3 columns) in a model of 3 one-vs-rest scores: both faces train (the estimator warns), and both refuse
    A's partial scores at prediction alike, each face naming its own opt-in."""
    with pytest.warns(ReleaseWarning, match="party A: releasing its partial scores"):
        model, processes, work = both(CLASSES, allow_span=False)
    assert_succeeded(processes)
    with pytest.raises(ConfigurationError) as refused:
        model.decision_function(both.last["dataset"])
    predicted = run_parties("predict", both.last["config"], both.last["data"], work, split="train")
    code, message = error_line(predicted, "A", "predict")
    reason, rest = str(refused.value).split("accept this: ")
    how, after = rest.split(" — ")
    assert "by a least-squares fit from its outputs" in reason and "rebuild column" in reason
    assert code == 2 and message == f"{reason}accept this: allow_reconstruction = true in its own [parties.A] " \
                                    f"table — {after}"
    assert how == "allow_reconstruction=['A']"
