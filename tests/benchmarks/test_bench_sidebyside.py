"""The side-by-side harness's own logic, without FATE: arguments, medians and ratios, the memory sampler,
finding FATE's interpreter. (The FATE runs themselves are benchmarks, not tests.)"""

import json
import stat
import sys

import pytest

from benchmarks.__main__ import main, parse_args
from benchmarks.fate_compare import (FateMissing, check_fate_python, hetero_nn_phases, hetero_nn_table,
                                    lr_table, secureboost_table, sshe_table, steady)
from benchmarks.sidebyside import RunFailed, System, TreeMemory, run_measured, side_by_side, summarise


def test_fate_options_parse():
    args = parse_args(["--fate", "--data-dir", "D"])
    assert args.fate == "lr" and args.data == "D" and args.repeats == 3 and args.key_bits == 2048
    args = parse_args(["--fate", "secureboost", "--data", "D", "--datasets", "breast", "--breast-trees", "2",
                       "--repeats", "1", "--fate-python", "/x/python", "--json", "out.json"])
    assert (args.fate, args.datasets, args.breast_trees, args.repeats, args.fate_python) == \
        ("secureboost", "breast", 2, 1, "/x/python")
    assert parse_args(["--fate", "sshe-lr", "--credit-epochs", "4"]).credit_epochs == 4
    args = parse_args(["--fate", "hetero-nn", "--nn-agg", "fedpass", "--nn-batch-size", "128"])
    assert (args.fate, args.nn_agg, args.nn_batch_size) == ("hetero-nn", "fedpass", 128)
    assert parse_args(["--fate", "hetero-nn"]).nn_agg == "sshe,fedpass"
    assert parse_args([]).fate is None


@pytest.mark.parametrize("argv", [["--fate", "xgboost"], ["--fate", "--breast-trees", "0"], ["--fate", "--repeats", "0"]])
def test_bad_fate_options_are_refused(argv, capsys):
    with pytest.raises(SystemExit):
        parse_args(argv)
    assert "error" in capsys.readouterr().err


def _record(dataset, system, repeat, seconds):
    return {"dataset": dataset, "system": system, "repeat": repeat, "seconds": seconds}


def test_summarise_gives_medians_and_ratios_to_the_baseline_paired_by_repeat():
    records = [_record("breast", "FATE", 0, 10.0), _record("breast", "vfl", 0, 2.0),
               _record("breast", "FATE", 1, 12.0), _record("breast", "vfl", 1, 4.0),
               _record("breast", "FATE", 2, 30.0),                        # vfl's third run failed
               _record("credit", "vfl", 0, 5.0)]                          # no FATE run on credit
    rows = summarise(records, lambda r: r["seconds"])
    assert [(r["dataset"], r["system"]) for r in rows] == [("breast", "FATE"), ("breast", "vfl"), ("credit", "vfl")]
    fate, vfl, credit = rows
    assert fate["median"] == 12.0 and fate["ratio"] == 1.0 and fate["runs"] == [10.0, 12.0, 30.0]
    assert vfl["median"] == 3.0 and vfl["ratio"] == 4.0 and vfl["paired"] == [5.0, 3.0]
    assert credit["ratio"] is None and credit["paired"] == []


def test_side_by_side_interleaves_systems_and_goes_on_after_a_failed_run():
    calls, logged = [], []

    def runner(name, fail_on=None):
        def run(dataset):
            calls.append((name, dataset))
            if (name, dataset, len(calls)) == fail_on:
                raise RunFailed("it broke")
            return {"seconds": 1.0}
        return run

    saved = []
    records = side_by_side([System("FATE", runner("FATE")), System("vfl", runner("vfl", ("vfl", "b", 4)))],
                           ["a", "b"], 2, log=logged.append, on_record=lambda rs: saved.append(len(rs)))
    assert calls == [("FATE", "a"), ("vfl", "a"), ("FATE", "b"), ("vfl", "b")] * 2
    assert len(records) == 7 and saved == list(range(1, 8))
    assert logged == ["[1/2] b vfl: it broke"]
    assert records[-1] == {"seconds": 1.0, "system": "vfl", "dataset": "b", "repeat": 1}
    with pytest.raises(ValueError, match="repeats"):
        side_by_side([], ["a"], 0)


def test_the_memory_sampler_sums_a_process_tree(tmp_path):
    # the child holds 60 MB and starts a grandchild holding 120 MB; both sleep while they are sampled
    child = ("import subprocess, sys, time\n"
             "held = b'x' * (60 * 2 ** 20)\n"
             "grandchild = subprocess.Popen([sys.executable, '-c', "
             "\"import time; held = b'y' * (120 * 2 ** 20); time.sleep(1.5)\"])\n"
             "time.sleep(1.5)\n"
             "grandchild.wait()\n"
             "print('done')\n")
    measured = run_measured([sys.executable, "-c", child], log_path=tmp_path / "log.txt", interval=0.05,
                            pss_interval=0.2)
    assert measured["returncode"] == 0 and (tmp_path / "log.txt").read_text().strip() == "done"
    assert measured["peak_processes"] == 2 and measured["memory_samples"] >= 10
    assert 180 <= measured["peak_rss_mb"] < 400
    assert 0 < measured["peak_pss_mb"] <= measured["peak_rss_mb"]
    assert measured["wall_s"] >= 1.5
    assert {"uptime", "load1"} <= set(measured["load_before"]) and measured["load_after"]["load1"] >= 0


SPIN = "import time; t = time.process_time(); exec('while time.process_time() - t < 0.6: pass')"


def test_a_measured_run_counts_the_cpu_of_its_descendants(tmp_path):
    # the child sleeps; its grandchild spins for about 0.6 CPU seconds: the run's CPU is the grandchild's
    child = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {SPIN!r}], check=True)"
    measured = run_measured([sys.executable, "-c", child], interval=0.05, pss_interval=None)
    assert measured["returncode"] == 0
    assert 0.6 <= measured["cpu_s"] < 0.6 + 5.0


def test_a_measured_run_counts_a_descendant_nobody_waits_for(tmp_path):
    # the grandchild spins, says so in a file and sleeps (the sampler sees its CPU meanwhile); its parent
    # exits as soon as the file is there, without waiting for it
    done = tmp_path / "spun"
    grandchild = SPIN + f"; open({str(done)!r}, 'w').close(); time.sleep(1.0)"
    child = (f"import os, subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {grandchild!r}])\n"
             f"while not os.path.exists({str(done)!r}): time.sleep(0.05)\n"
             "time.sleep(0.5)\n")
    measured = run_measured([sys.executable, "-c", child], interval=0.05, pss_interval=None)
    assert measured["returncode"] == 0
    assert 0.55 <= measured["cpu_s"] < 0.6 + 5.0


def test_the_memory_sampler_of_this_process_and_its_errors():
    with TreeMemory(interval=0.05) as memory:
        held = b"z" * (40 * 2 ** 20)
        memory.sample()
    assert memory.peak_mb >= 40 and memory.peak_processes >= 1 and len(held) > 0
    assert memory.peak_pss_bytes > 0     # read on the first sample
    with pytest.raises(ValueError, match="interval"):
        TreeMemory(interval=0)
    with pytest.raises(ValueError, match="interval"):
        TreeMemory(pss_interval=-1)


def _fake_python(tmp_path, body: str) -> str:
    path = tmp_path / "python"
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return str(path)


def test_a_missing_or_unusable_fate_interpreter_says_how_to_install_it(tmp_path):
    with pytest.raises(FateMissing, match=r"pip install pyfate==2\.2\.0"):
        check_fate_python(None)
    with pytest.raises(FateMissing, match="does not exist"):
        check_fate_python(str(tmp_path / "nowhere" / "python"))
    broken = _fake_python(tmp_path, "echo \"ModuleNotFoundError: No module named 'fate'\" >&2; exit 1\n")
    with pytest.raises(FateMissing, match="No module named 'fate'.*pip install pyfate"):
        check_fate_python(broken)


def test_fate_under_pandas_3_is_refused_for_secureboost(tmp_path):
    fake = _fake_python(tmp_path, "echo '{\"fate\": \"2.2.0\", \"pandas\": \"3.0.6\"}'\n")
    assert check_fate_python(fake) == {"fate": "2.2.0", "pandas": "3.0.6"}
    with pytest.raises(FateMissing, match="pandas<3"):
        check_fate_python(fake, need_pandas_2=True)


def test_the_fate_comparison_stops_with_a_clear_error_before_running(tmp_path, monkeypatch, capsys):
    assert main(["--fate", "secureboost"]) == 2
    assert "--fate needs --data-dir" in capsys.readouterr().err
    assert main(["--fate", "--data-dir", str(tmp_path)]) == 2
    assert "breast_hetero_guest.csv" in capsys.readouterr().err
    assert main(["--fate", "sshe-lr", "--data-dir", str(tmp_path), "--datasets", "motor"]) == 2
    assert "motor not among" in capsys.readouterr().err
    assert main(["--fate", "hetero-nn", "--data-dir", str(tmp_path), "--datasets", "motor"]) == 2
    assert "motor not among" in capsys.readouterr().err
    for name in ("breast_hetero_guest.csv", "breast_hetero_host.csv"):
        (tmp_path / name).write_text("id,y\n")
    monkeypatch.setenv("VFL_FATE_PYTHON", str(tmp_path / "no-venv" / "bin" / "python"))
    assert main(["--fate", "secureboost", "--data-dir", str(tmp_path), "--datasets", "breast"]) == 2
    err = capsys.readouterr().err
    assert "no-venv/bin/python does not exist" in err and "pip install pyfate==2.2.0" in err
    assert main(["--fate", "hetero-nn", "--data-dir", str(tmp_path), "--datasets", "breast", "--nn-agg", "paillier"]) == 2
    assert "--nn-agg: paillier given, choose among sshe, fedpass" in capsys.readouterr().err


def _run(system, dataset, repeat, seconds, **extra):
    load = {"uptime": "", "load1": 1.0}
    record = {"system": system, "dataset": dataset, "repeat": repeat, "auc": 0.99, "predict_s": 1.0, "fit_s": 50.0,
              "peak_rss_mb": 2000.0, "peak_pss_mb": 900.0, "load_before": load, "load_after": load}
    record.update(extra)
    return record


def test_the_tables_put_another_system_beside_fate():
    trees = [[{"leaf": True}]]
    records = [_run("FATE", "breast", r, None, tree_s=[20.0, 22.0], tree_median_s=21.0, encrypt_gh_s=[5.0, 6.0],
                    tree_shapes=[{"leaves": 8}, {"leaves": 7}], trees=trees, cpu_s=120.0) for r in range(2)]
    records += [_run("vfl", "breast", r, None, tree_s=[2.0, 2.2], tree_median_s=2.1, cpu_s=8.0) for r in range(2)]
    text = secureboost_table(records)
    vfl_row = next(line for line in text.splitlines() if "vfl" in line)
    assert "10.00" in vfl_row   # FATE's median 21 s per tree over vfl's 2.1 s
    assert "15.00" in vfl_row   # and 120 CPU seconds over 8
    assert "5.50" in text and "5.50" in text and "8/7" in text and "2000 / 900" in text

    epochs = [_run(s, "breast", r, None, epochs=5, epoch_s=[9.0, 4.0, 4.0, 4.0, 4.0] if s == "FATE" else
                   [2.0, 1.0, 1.0, 1.0, 1.0], cpu_s=100.0 if s == "FATE" else 10.0 + r)
              for r in range(2) for s in ("FATE", "vfl packed")]
    assert steady(epochs[0]) == 4.0
    sshe = sshe_table(epochs)
    assert " 20.00 |" in sshe and " 2.10 |" in sshe          # CPU seconds per epoch: FATE's, vfl's median
    assert sshe.splitlines()[-1] == ("breast: vfl packed 4.00x FATE's SSHE-LR per epoch (paired 4.00, 4.00; goal >= 3x: "
                                     "met), 9.52x in CPU seconds per epoch of the whole run; median train AUC 0.9900 "
                                     "against 0.9900")
    text, lines = lr_table(epochs)
    assert "vfl packed" in text and lines == [
        "breast: vfl packed trains 4.00x faster per epoch than FATE (medians 1.00 s against 4.00 s; paired ratios "
        "by repeat 4.00, 4.00); train AUC after FATE's 5 epochs -, - against FATE's 0.9900"]
    json.dumps(records)    # the records are what --json writes


def test_the_shared_benchmark_sets_cpu_seconds_beside_the_clock():
    from benchmarks.shared import tables
    from benchmarks.sidebyside import table

    def run(epoch_s, cpu_s):
        counts = {key: 1 for key in ("encryptions", "rerandomizations", "multiexp_terms", "long_exponent_terms",
                                     "scalar_products", "decryptions")}
        return {"epochs": [9.0, epoch_s, epoch_s], "cpu_epochs": [20.0, cpu_s / 5, cpu_s / 5], "cpu_s": cpu_s,
                "load_before": "1.00 1.00 1.00",
                "bytes": {"all": 2048, "A": 1024, "B": 1024}, "counts": {"A": counts, "B": counts},
                "seconds": {"A scores": epoch_s / 2}}

    runs = {"yang": [run(1.0, 10.0), run(1.2, 12.0)], "yang-packed": [run(0.5, 5.0), run(0.5, 6.0)],
            "shared": [run(2.0, 30.0), run(3.0, 33.0)], "shared-packed": [run(0.6, 6.0), run(0.5, 6.6)]}
    result = {"rows": 569, "features": 30, "epochs": 3, "runs": runs,
              "median_seconds": {"yang": 1.1, "yang-packed": 0.5, "shared": 2.5, "shared-packed": 0.55},
              "median_cpu_seconds": {"yang": 2.2, "yang-packed": 1.1, "shared": 6.3, "shared-packed": 1.26},
              "ratios": {"shared / yang": {"wall": [2.0, 2.5], "cpu": [3.0, 2.75], "cpu_epoch": 6.3 / 2.2},
                         "shared-packed / yang-packed": {"wall": [1.2, 1.0], "cpu": [1.2, 1.1],
                                                         "cpu_epoch": 1.26 / 1.1}},
              "max_weight_differences": {"shared-packed - shared": 0.0}}
    text = tables([result], table)
    assert " 30.0, 33.0 |" in text and " 6.0, 6.6 |" in text
    assert " 6.00, 6.60 |" in text                     # CPU seconds per epoch of each shared run
    assert "569 rows: shared / yang 2.86x in CPU seconds per epoch (ratio of the medians); 2.25x wall per epoch " \
           "(median of the rounds: 2.00, 2.50); CPU seconds of the whole run 2.88x" in text
    assert "569 rows: shared-packed / yang-packed 1.15x in CPU seconds per epoch" in text and "run 1.15x" in text
    assert "largest weight difference shared-packed - shared 0.0e+00" in text


def test_the_hetero_nn_table_sets_fate_s_agg_layers_and_another_system_against_fate_sshe():
    def run(system, repeat, epoch_s, cpu_s, agg):
        phases = [{"forward": [epoch_s / 3, 3], "backward": [epoch_s / 2, 3]}] * 5 if agg == "sshe" else []
        return _run(system, "breast", repeat, None, epochs=5, epoch_s=[epoch_s * 2] + [epoch_s] * 4, cpu_s=cpu_s,
                    agg=agg, phases=phases, host={"phases": phases})

    records = [run("FATE SSHE", r, 60.0, 500.0, "sshe") for r in range(2)]
    records += [run("FATE FedPass", r, 3.0, 40.0, "fedpass") for r in range(2)]
    records += [run("vfl", r, 6.0, 50.0 + 10 * r, "shared") for r in range(2)]
    text = hetero_nn_table(records)
    rows = {line.split("|")[2].strip(): line for line in text.splitlines()[2:]}
    assert set(rows) == {"FATE SSHE", "FATE FedPass", "vfl"}
    assert " 20.00 |" in rows["FATE FedPass"] and " 10.00 |" in rows["vfl"]     # FATE SSHE's 60 s per epoch over theirs
    assert " 100.00 |" in rows["FATE SSHE"] and " 11.00 |" in rows["vfl"]     # CPU seconds per epoch: 500 / 5, 55 / 5
    assert " 9.09 |" in rows["vfl"]                                           # and their ratio, 100 / 11
    assert "120.0, 60.0, 60.0, 60.0, 60.0" in rows["FATE SSHE"] and "shared, shared" in rows["vfl"]
    phases = hetero_nn_phases(records)
    assert "| breast |  host |                            backward |" in phases
    assert phases.count(" 30.00 |") == 2      # 60 s / 2 per epoch, guest and host
    json.dumps(records)


def test_every_fate_table_gives_the_auc_beside_the_time():
    def run(system, repeat, auc):
        return _run(system, "breast", repeat, None, auc=auc, epochs=5, epoch_s=[2.0] * 5, cpu_s=10.0, agg="-",
                    tree_s=[2.0, 2.0], tree_median_s=2.0, tree_shapes=[], trees=[], phases=[])

    records = [run("FATE", r, 0.9812) for r in range(2)] + [run("vfl", r, 0.9734) for r in range(2)]
    nn = [run("FATE SSHE", r, 0.9812) for r in range(2)] + [run("vfl", r, 0.9734) for r in range(2)]
    for text in (secureboost_table(records), sshe_table(records), hetero_nn_table(nn), lr_table(records)[0]):
        header, _, *rows = text.splitlines()[:4]
        assert "AUC" in header and "s/" in header
        assert "0.9812" in rows[0] and "0.9734" in rows[1]
