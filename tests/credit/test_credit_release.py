"""A feature party's part of a scorecard score: what the label party receives, what it rebuilds, and the check.

The bank (label party) learns each row's score; minus its own points and the base
points that is telco's part, a sum over telco's selected columns of one value per
bin: one value per cell of telco's bins.  Rows in the same cell get the same part,
rows in different cells (generically) different ones, so the bank groups rows by
cell and, knowing some of telco's rows, names every other row's bins.  These tests
measure it on what the bank received, with one, two and three columns; telco's
release check (against its raw columns and their bin codes, ``"<column> (bin)"``)
refuses it by default, passes it with the opt-in, and DP noise brings it down.
"""

import json
import warnings

import numpy as np
import pytest
from sklearn.metrics import adjusted_rand_score, roc_auc_score

from credit_data import credit_data, credit_frames
from vfl import VerticalDataset, VerticalLogisticRegression
from vfl.errors import ConfigurationError
from vfl.parties.scaling import Standardizer
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE
from vfl.protocols.release import ReleaseWarning, assess, evaluate
from vfl.runs.credit import assessed, part_release
from vfl.runs.linear import raw_release

KEYS = {"key_bits": 1024, "insecure": True}


def pipe_of(top_k, **model):
    return VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(max_bins=10), **KEYS)),
        ("selection", VerticalSelection(iv_threshold=0.0, top_k_per_party=top_k)),
        ("scorecard", VerticalScorecard(VerticalLogisticRegression(**KEYS, **model))),
    ])


def received(pipe, data):
    """Telco's part of each score, in log-odds, as the bank holds it: the score minus its own points and the base
    points, over minus the points per unit of log-odds."""
    card = pipe.named_steps["scorecard"]
    own = card.points(pipe._through(data))["bank"]
    return -(pipe.predict_score(data) - own - card.base_points_) / card.scale_.factor


def telco_table(pipe):
    """Telco's release function on its raw columns (what its check assesses)."""
    card = pipe.named_steps["scorecard"]
    model = card.model_
    scaler = Standardizer(np.asarray(model.mean_["telco"]), np.asarray(model.scale_["telco"]))
    spec = raw_release(np.atleast_2d(model.coef_["telco"]), scaler)
    return card._binners["telco"], card.coders_["telco"], part_release(card._binners["telco"], card.coders_["telco"],
                                                                       spec)


def cells(pipe, data):
    card = pipe.named_steps["scorecard"]
    codes = card._codes(pipe._through(data), "telco")
    selected = card.coders_["telco"].selected
    return np.unique(codes[:, selected], axis=0, return_inverse=True)[1].ravel(), codes


def test_the_table_is_what_the_bank_receives_missing_values_and_bin_edges_included():
    data = credit_data(n=2000, seed=5)
    pipe = pipe_of(3, allow_reconstruction=["telco"]).fit(data)
    binner, coder, table = telco_table(pipe)
    assert len(coder.selected) == 3 and len(table["tables"]) == 3
    telco, bank = credit_frames(n=2000, seed=105)
    edges = binner.thresholds_[coder.columns.index("calls")]
    telco.loc[:49, "calls"] = edges[np.arange(50) % len(edges)]         # exactly at an edge: the bin below
    telco.loc[50:59, "tenure"] = np.nan                  # missing where training had none: the missing bin
    test = VerticalDataset({"telco": telco, "bank": bank}, label="default", id_column="id")
    sent = evaluate(table, test.features("telco"))[:, 0]
    np.testing.assert_allclose(received(pipe, test), sent, atol=1e-4)     # fixed point: 16 fractional bits
    groups, _ = cells(pipe, test)
    spread = [np.ptp(sent[groups == g]) for g in np.unique(groups)]
    assert max(spread) < 1e-12                           # one value per cell of telco's bins


@pytest.mark.parametrize("top_k", [1, 2, 3])
def test_the_bank_names_every_row_s_bins_from_its_part_refused_by_default_passed_with_the_opt_in(top_k):
    data, test = credit_data(n=3000, seed=6), credit_data(n=3000, seed=106)
    with pytest.warns(ReleaseWarning, match=r"party telco: releasing its part of each score .* rebuild column "
                                            r"'\w+ \(bin\)' for \d+% of rows"):
        refused = pipe_of(top_k).fit(data)
    with pytest.raises(ConfigurationError, match=r"rebuild column '\w+ \(bin\)' for \d+% of rows .*"
                                                 r"allow_reconstruction=\['telco'\] in the scorecard's model"):
        refused.predict_score(test)
    pipe = pipe_of(top_k, allow_reconstruction=["telco"]).fit(data)
    part = received(pipe, test)
    groups, codes = cells(pipe, test)
    seen = np.unique(np.round(part, 6), return_inverse=True)[1]
    assert adjusted_rand_score(groups, seen) > 0.99      # measured 1.0 with 1, 2 and 3 columns: rows by cell
    coder = pipe.named_steps["scorecard"].coders_["telco"]
    names, values = assessed(pipe.named_steps["scorecard"]._binners["telco"], coder,
                             pipe._through(test).features("telco"), "telco")
    findings = {f.column: f for f in assess(values, part[:, None], names).findings}
    # knowing half the rows, the bank names the others' bins: every row whose cell it saw (measured: 100% with one
    # and two columns of 10 bins; 62-89% with three, 1,331 cells for 1,500 known rows); a constant guess: 10-11%
    for j in coder.selected:
        found = findings[f"{coder.columns[j]} (bin)"]
        assert found.share >= 0.99 if top_k < 3 else found.share > 0.5      # the model's secret start varies it
        assert found.baseline < 0.15


def test_dp_noise_on_the_part_brings_the_bins_down_to_a_constant_guess():
    data, test = credit_data(n=3000, seed=7), credit_data(n=3000, seed=107)
    exact = pipe_of(2, allow_reconstruction=["telco"]).fit(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ReleaseWarning)  # under DP the training check warns of nothing
        noisy = pipe_of(2, release_epsilon=2.0).fit(data)
    part = received(noisy, test)                         # no opt-in: the noisy parts pass telco's check
    groups, _ = cells(noisy, test)
    assert adjusted_rand_score(groups, np.unique(np.round(part, 6), return_inverse=True)[1]) < 0.05
    coder = noisy.named_steps["scorecard"].coders_["telco"]
    names, values = assessed(noisy.named_steps["scorecard"]._binners["telco"], coder,
                             noisy._through(test).features("telco"), "telco")
    assert all(f.gain < 0.05 for f in assess(values, part[:, None], names).findings)
    scores = noisy.predict_score(test)
    np.testing.assert_array_equal(scores, noisy.predict_score(test))     # the same noise per row and version
    # the exact parts last: released, they join telco's ledger, and a noisy release after them would be checked
    # with them (and refused: they give the bins away)
    y = (test.labels == "yes").astype(int)
    auc_exact, auc_noisy = roc_auc_score(y, -exact.predict_score(test)), roc_auc_score(y, -scores)
    assert auc_noisy < auc_exact - 0.02                   # the price: telco's signal drowned (measured below)
    with pytest.raises(ConfigurationError, match=r"\(with noise, epsilon 2\) would let the label party bank rebuild"):
        noisy.predict_score(test)


def test_vfl_serve_checks_telco_s_part_at_every_load_of_a_version(tmp_path):
    from vfl.protocols.release import ReleaseLedger, ReleasePolicy
    from vfl.serving.feature import FeatureService
    from vfl.serving.models import load_share
    from vfl.serving.store import CSVStore

    data = credit_data(n=2000, seed=8)
    pipe = pipe_of(2, allow_reconstruction=["telco"]).fit(data)
    folder = tmp_path / "models" / "1"
    folder.mkdir(parents=True)
    (folder / "model_telco.json").write_text(json.dumps(pipe.shards()["telco"]))
    telco, _ = credit_frames(n=500, seed=108)
    telco.to_csv(tmp_path / "store.csv", index=False)
    share = load_share(tmp_path / "models", "1", "telco", "feature", "credit")
    for allowed in (False, True):
        service = FeatureService.__new__(FeatureService)
        service.label, service.store = "bank", CSVStore(tmp_path / "store.csv", "telco")
        service.release = ReleasePolicy("telco", ReleaseLedger.at(tmp_path / str(allowed), "telco"), allowed=allowed,
                                        how="allow_reconstruction = true in its own [parties.telco] table")
        if not allowed:
            with pytest.raises(ConfigurationError, match=r"party telco: releasing its part of each score \(one value "
                                                         r"per bin of its selected columns\) in served version 1 would "
                                                         r"let the label party bank rebuild column '\w+ \(bin\)'"):
                share.check_release(service, "1", {}, 0.0, 0)
        else:
            share.check_release(service, "1", {}, 0.0, 0)
            ledger = json.loads((tmp_path / "True" / "release_ledger.json").read_text())["releases"]
            assert ledger[0]["spec"]["kind"] == "table" and ledger[0]["columns"][-1].endswith(" (bin)")
