"""The LR comparison's quality figures, without FATE: the AUC after each epoch from recorded weights, and the
epochs, seconds and CPU seconds a run needs to reach FATE's final AUC."""

import numpy as np
import pytest
from sklearn.metrics import roc_auc_score

from benchmarks.fate_compare import (REACH_TOLERANCE, add_reach, cumulative, epoch_aucs, fate_epoch_aucs,
                                    lr_table, time_to_reach)


def test_time_to_reach_takes_the_epoch_from_which_the_auc_stays_at_the_target():
    aucs, seconds, cpu = [0.90, 0.97, 0.95, 0.98, 0.99], [3.0, 4.0, 5.0, 6.0, 7.0], [6.0, 8.0, 10.0, 12.0, 14.0]
    # epoch 2 touches 0.97 and falls back: it stays there from epoch 4 on
    assert time_to_reach(aucs, seconds, cpu, 0.97) == {"reached": True, "epochs": 4, "first": 2, "auc": 0.98,
                                                       "seconds": 6.0, "cpu_s": 12.0}
    assert time_to_reach(aucs, seconds, cpu, 0.9)["epochs"] == 1
    # within the tolerance counts; just beyond it does not
    assert time_to_reach(aucs, seconds, cpu, 0.95 + REACH_TOLERANCE / 2)["epochs"] == 2
    assert time_to_reach(aucs, seconds, cpu, 0.95 + 2 * REACH_TOLERANCE)["epochs"] == 4
    missed = time_to_reach(aucs[:3], seconds, None, 0.96)
    assert missed == {"reached": False, "epochs": 3, "first": 2, "auc": 0.97, "seconds": None, "cpu_s": None}
    assert time_to_reach([0.5], [1.0], [1.0], 0.9)["first"] is None
    with pytest.raises(ValueError):
        time_to_reach([], [], [], 0.9)


def test_cumulative_seconds_count_the_setup_before_the_first_epoch():
    assert cumulative({"setup_s": 2.0, "epoch_s": [1.0, 1.5]}) == [3.0, 4.5]
    assert cumulative({"epoch_s": [1.0, 1.5]}) == [1.0, 2.5]


def test_epoch_aucs_sum_the_parties_partial_scores():
    rng = np.random.default_rng(0)
    guest, host = rng.normal(size=(40, 2)), rng.normal(size=(40, 3))
    labels = (guest[:, 0] - host[:, 1] + 0.3 * rng.normal(size=40) > 0).astype(int)
    good = ([[1.0, 0.0, 0.5]], [[0.0, -1.0, 0.0]])             # guest: 2 weights and the intercept; host: 3
    bad = ([[-1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]])
    aucs = epoch_aucs([(guest, bad[0] + good[0], True), (host, bad[1] + good[1], False)], labels)
    expected = roc_auc_score(labels, guest[:, 0] - host[:, 1])
    assert aucs == [pytest.approx(1 - expected), pytest.approx(expected)] and expected > 0.9
    # a party with fewer epochs (a run stopped early) limits the curve
    assert len(epoch_aucs([(guest, bad[0] + good[0], True), (host, bad[1], False)], labels)) == 1


def test_fate_epoch_aucs_join_the_host_rows_on_the_id(tmp_path):
    ids = np.arange(10)
    y = np.array([0, 1] * 5)
    import pandas as pd
    pd.DataFrame({"id": ids, "y": y, "x0": y * 2.0 - 1}).to_csv(tmp_path / "toy_hetero_guest.csv", index=False)
    # the host's file in another order: its x0 is the label read backwards
    pd.DataFrame({"id": ids[::-1], "x0": (1 - y[::-1]) * 1.0}).to_csv(tmp_path / "toy_hetero_host.csv", index=False)
    record = {"header": ["x0"], "epoch_weights": [[0.0, 0.0], [0.0, 0.0]],
              "host": {"header": ["x0"], "epoch_weights": [[1.0], [-1.0]]}}
    assert fate_epoch_aucs(record, tmp_path, "toy") == [0.0, 1.0]


def _run(system, repeat, aucs, epoch_s, cpu, final=None):
    load = {"uptime": "", "load1": 1.0}
    return {"system": system, "dataset": "breast", "repeat": repeat, "auc": aucs[-1] if final is None else final,
            "epoch_auc": aucs, "epoch_s": epoch_s, "epoch_cpu_s": cpu, "epochs": len(aucs), "predict_s": 1.0,
            "fit_s": sum(epoch_s), "peak_rss_mb": 2000.0, "peak_pss_mb": 900.0, "load_before": load, "load_after": load}


def test_the_lr_table_puts_the_auc_and_the_time_to_fates_auc_beside_the_time():
    records = [_run("FATE", r, [0.93, 0.06, 0.97, 0.98], [4.0] * 4, [10.0, 20.0, 30.0, 40.0]) for r in range(2)]
    records += [_run("vfl", 0, [0.99, 0.90, 0.96, 0.97, 0.975, 0.981], [1.0] * 6, [2.0, 4.0, 6.0, 8.0, 10.0, 12.0]),
                _run("vfl", 1, [0.95, 0.90, 0.96, 0.97, 0.975, 0.979], [1.0] * 6, [2.0, 4.0, 6.0, 8.0, 10.0, 12.0])]
    add_reach(records)
    assert records[0]["target"] == 0.98 and records[0]["reach"]["epochs"] == 4
    assert [r["reach"]["reached"] for r in records[2:]] == [True, False]
    text, lines = lr_table(records)
    row = next(line for line in text.splitlines() if " vfl |" in line)
    assert "0.9700, 0.9700" in row            # the AUC after FATE's 4 epochs, beside the time per epoch
    assert "6 (1), not reached" in row and "12.0 (1 of 2 runs)" in row
    assert lines[0].endswith("train AUC after FATE's 4 epochs 0.9700, 0.9700 against FATE's 0.9800")
    assert lines[1] == ("breast: to reach FATE's final train AUC 0.9800 for good (within 0.0001, staying there to the "
                        "end of the run; medians from the start of fit): vfl 6 epochs, 6.0 s, 12.0 CPU s (1 of 2 runs); FATE 4 epochs, 16.0 s, 40.0 CPU s; "
                        "FATE / vfl in CPU s: 3.33")
