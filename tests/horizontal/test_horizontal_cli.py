import pandas as pd

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
