"""The release benchmark measures a check that runs: it times the check of a linear and a network release."""

from benchmarks.release import check_cost


def test_the_release_benchmark_times_the_check_of_both_kinds_of_release():
    out = check_cost(3000, columns=6, repeats=1, predict=False)
    assert out["rows"] == 3000 and out["columns"] > 0
    assert out["median_check"] > 0 and out["median_network_check"] > 0 and out["median_prediction"] is None
