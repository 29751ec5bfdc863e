"""Outside a terminal or notebook, ``verbose="auto"`` writes a plain progress line now and then to standard error.

A script or a CI log then shows a fit of half a minute is alive; a short fit says nothing, and
``verbose=False`` never does.
"""

from __future__ import annotations

import io

import pytest

import vfl.progressbar as progressbar
from vertical_data import make_vertical
from vfl import (VerticalDataset, VerticalGradientBoostingClassifier, VerticalLogisticRegression,
                 VerticalMLPClassifier)

FAST = dict(key_bits=1024, insecure=True)


@pytest.fixture(scope="module")
def data():
    frame_a, frame_b, _, _ = make_vertical(n_rows=50, seed=8)
    return VerticalDataset({"bank": frame_a, "shop": frame_b}, label="y", id_column="id")


def test_a_line_at_most_every_interval_and_one_at_the_end(monkeypatch):
    times = iter([0.0, 4.0, 8.0, 12.0, 16.0, 25.0, 27.0, 30.0])
    monkeypatch.setattr(progressbar, "_clock", lambda: next(times))
    out = io.StringIO()
    bar = progressbar.ProgressBar("auto", 30, "vfl training", "epoch", stream=out)
    assert bar.bar is None and bar.shown
    for loss in (0.9, 0.8, 0.7, 0.6, 0.5, 0.4):
        bar.step(loss)
    bar.close()
    assert out.getvalue().splitlines() == ["vfl training: epoch 3/30, loss 0.70000, 12 s",
                                           "vfl training: epoch 5/30, loss 0.50000, 25 s",
                                           "vfl training: done, 6 epochs, loss 0.40000, 30 s"]


def test_a_short_fit_says_nothing_and_verbose_false_never_does(monkeypatch):
    times = iter([0.0, 1.0, 2.0, 50.0, 60.0])
    monkeypatch.setattr(progressbar, "_clock", lambda: next(times))
    out = io.StringIO()
    with progressbar.ProgressBar("auto", 5, "vfl mlp", "epoch", stream=out) as bar:
        bar.step(0.5)
        bar.step(0.4)
    assert out.getvalue() == ""
    silent = progressbar.ProgressBar(False, 5, "vfl mlp", "epoch", stream=out)
    assert not silent.shown
    silent.step(0.3)
    silent.close()
    assert out.getvalue() == ""


@pytest.mark.parametrize("make, title, unit", [
    (lambda: VerticalLogisticRegression(max_iter=2, tol=None, **FAST), "vfl training", "epoch"),
    (lambda: VerticalGradientBoostingClassifier(max_iter=2, max_depth=2, **FAST), "vfl boosting", "iteration"),
    # the network's feature party checks its part before each epoch, and with three columns and 50 rows whether it
    # refuses depends on the random weights (its refusals run in tests/mlp): here it opts in, as this test is
    # about the progress lines
    (lambda: VerticalMLPClassifier(max_iter=2, hidden_layer_sizes=(3,), batch_size=50, allow_reconstruction=["bank"]),
     "vfl mlp", "epoch"),
])
def test_every_estimator_writes_its_lines_to_standard_error(capsys, monkeypatch, data, make, title, unit):
    monkeypatch.setattr(progressbar, "LINE_INTERVAL", 0.0)     # a line after every step
    make().fit(data)
    captured = capsys.readouterr()
    lines = captured.err.splitlines()
    assert f"{title}: {unit} 1/2, loss " in lines[0] and f"{title}: {unit} 2/2, loss " in lines[1]
    assert lines[-1].startswith(f"{title}: done, 2 {unit}s, loss ") and not captured.out
    make().set_params(verbose=False).fit(data)
    assert capsys.readouterr().err == ""
