import re

import pandas as pd
import pytest

from vfl.cli import main


def test_vfl_fedavg_runs_and_writes_csv(tmp_path, capsys):
    out = tmp_path / "history.csv"
    code = main(["fedavg", "--dataset", "iris", "--clients", "4", "--fraction", "0.5", "--local-epochs", "2",
                 "--batch-size", "8", "--rounds", "3", "--lr", "0.2", "--seed", "1", "--no-progress",
                 "--csv-out", str(out)])
    assert code == 0
    text = capsys.readouterr().out
    assert "test_accuracy" in text and "bytes_up" in text and "final test accuracy" in text
    history = pd.read_csv(out)
    assert list(history["round"]) == [1, 2, 3]
    assert (history["clients"] == 2).all()


def test_vfl_fedavg_mlp_noniid_robust_and_afl(capsys):
    assert main(["fedavg", "--model", "mlp", "--hidden", "16,16", "--partition", "pathological",
                 "--clients", "10", "--fraction", "0.5", "--aggregator", "trimmed_mean", "--rounds", "2",
                 "--no-progress"]) == 0
    assert "warning" not in capsys.readouterr().err  # 5 clients per round: one trimmed from each end
    assert main(["fedavg", "--algorithm", "afl", "--partition", "dirichlet", "--alpha", "0.3",
                 "--dataset", "wine", "--clients", "3", "--fraction", "1", "--batch-size", "all",
                 "--rounds", "2", "--no-progress"]) == 0
    text = capsys.readouterr().out
    assert "worst_domain_loss" in text and "mixture weights lambda" in text


def test_vfl_fedavg_bad_input_exit_code(capsys):
    assert main(["fedavg", "--fraction", "0", "--rounds", "1", "--no-progress"]) == 2
    assert "fraction_fit (C) must be in (0, 1]" in capsys.readouterr().err
    assert main(["fedavg", "--clients", "100000", "--rounds", "1", "--no-progress"]) == 2
    assert "100000 clients" in capsys.readouterr().err


def test_vfl_fedavg_warns_when_robust_aggregator_protects_nothing(capsys):
    # the default C=0.1 of 10 clients samples one client per round
    assert main(["fedavg", "--clients", "10", "--aggregator", "median", "--rounds", "3", "--no-progress"]) == 0
    err = capsys.readouterr().err
    assert err.count("vfl fedavg: warning: aggregator='median' with m=1") == 1


@pytest.mark.parametrize("algorithm, extra, columns", [
    ("l2gd", ["--lam", "0.1", "--p", "0.3", "--lr", "0.3"], ["local_steps", "aggregation_steps"]),
    ("perfedavg", ["--adapt-lr", "0.05", "--tau", "2", "--variant", "fo"], ["bytes_down"]),
    ("hierfavg", ["--edges", "2", "--kappa1", "2", "--kappa2", "3"], ["edge_rounds", "bytes_edge_cloud"]),
    ("local", ["--local-epochs", "2"], []),
])
def test_vfl_fedavg_runs_every_algorithm_on_the_same_clients(tmp_path, capsys, algorithm, extra, columns):
    out = tmp_path / "history.csv"
    assert main(["fedavg", "--algorithm", algorithm, "--partition", "pathological", "--clients", "6",
                 "--fraction", "1", "--batch-size", "all", "--rounds", "2", "--no-progress",
                 "--csv-out", str(out), *extra]) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"{algorithm} on digits: K=6 clients (pathological")
    assert "client_accuracy_mean" in text and "client_accuracy_worst10" in text
    assert re.search(r"per-client test accuracy: mean 0\.\d{4}, worst 10% 0\.\d{4}", text)
    assert ("final test accuracy" in text) == (algorithm != "local")  # local-only has no global model
    history = pd.read_csv(out)
    assert list(history["round"]) == [1, 2] and set(columns) <= set(history.columns)
    assert history["client_accuracy_mean"].between(0, 1).all()


def test_vfl_fedavg_new_options_bad_input(capsys):
    assert main(["fedavg", "--algorithm", "l2gd", "--p", "1.5", "--rounds", "1", "--no-progress"]) == 2
    assert r"p must be in (0, 1), got 1.5" in capsys.readouterr().err
    assert main(["fedavg", "--algorithm", "hierfavg", "--edges", "11", "--rounds", "1", "--no-progress"]) == 2
    assert "edges (L) must be between 1 and the number of clients 10, got 11" in capsys.readouterr().err
    assert main(["fedavg", "--algorithm", "perfedavg", "--tau", "0", "--rounds", "1", "--no-progress"]) == 2
    assert "tau (local steps) must be an integer >= 1" in capsys.readouterr().err
    assert main(["fedavg", "--clients", "1000", "--rounds", "1", "--no-progress"]) == 2
    assert "too few to hold out a test row" in capsys.readouterr().err
    with pytest.raises(SystemExit) as stop:
        main(["fedavg", "--algorithm", "ditto"])
    assert stop.value.code == 2
