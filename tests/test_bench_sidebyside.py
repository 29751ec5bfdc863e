"""The side-by-side harness's own logic: medians and ratios, interleaving, the memory sampler."""

import sys

import pytest

from vfl.bench.sidebyside import RunFailed, System, TreeMemory, run_measured, side_by_side, summarise


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
