"""The reason codes on their own, attacked: a feature party's code per row (which of its consented columns pushes
its part furthest toward the adverse side) is a release, and the release check sees through it.

The attacker is the label party, which knows some of the feature party's rows.  With a 0/1 column whose weight
dominates, the code "flag" is the flag itself, rebuilt for far more rows than a constant guess, so the check
refuses the codes (``refuse`` raises, naming the column) unless the party opts in.  With a column and its
logarithm (derived from each other) a code tells one bit per row, the side of one threshold: it rebuilds
neither column (measured 3% of rows against a guess's 2%), and the check passes it.  Codes over continuous,
independent columns with balanced weights pass.  The totals a party sends beside its codes are checked on
their own (tests/linear/test_explain.py, tests/linear/test_release_check.py: discrete and derived columns);
here the codes are the only release.
"""

import numpy as np
import pytest

from vfl import ConfigurationError
from vfl.protocols.release import assess, evaluate, linear_release, reason_release, refuse


def _codes(x, weights, named, sign=1.0):
    """The reason-code release of a party with one unit per column (contribution ``w_j (x_j - mean_j)``)."""
    mean = x.mean(axis=0)
    parts = []
    for j, w in enumerate(weights):
        unit = np.zeros(len(weights))
        unit[j] = w
        parts.append(linear_release(unit, -float(unit @ mean)))
    return reason_release(parts, named, sign)


def _verdict(x, spec, columns):
    return assess(x, evaluate(spec, x), columns)


def test_a_code_naming_a_0_1_column_gives_the_column_away_and_is_refused():
    rng = np.random.default_rng(1)
    x = np.column_stack([rng.normal(size=600), (rng.random(600) < 0.5).astype(float)])
    spec = _codes(x, [0.3, 2.0], named=[1])                      # only "flag" may be named: still the column
    verdict = _verdict(x, spec, ["t0", "flag"])
    finding = max(verdict.findings, key=lambda f: f.sure_gain)
    assert finding.column == "flag" and finding.share > 0.9 and finding.baseline < 0.6, finding
    with pytest.raises(ConfigurationError, match=r"party telco: releasing its reason codes would let the label "
                                                 r"party bank rebuild column 'flag'"):
        refuse("telco", "bank", "its reason codes", verdict, "allow_reconstruction = true")


def test_a_code_over_a_column_and_its_logarithm_tells_one_side_and_does_not_rebuild_the_column():
    rng = np.random.default_rng(2)
    income = rng.lognormal(10, 0.4, 600)
    x = np.column_stack([income, np.log(income)])                # derived from each other
    spec = _codes(x, [1e-4, -1.5], named=[0, 1])
    codes = evaluate(spec, x)
    # what the attacker gets: one bit per row, which side of one income the row lies (the two contributions
    # cross once); it rebuilds neither column within the check's tolerance for more rows than a guess
    side = codes[:, 0] > 0
    assert 0 < side.mean() < 1 and np.all(income[side].min() >= income[~side & (codes[:, 1] > 0)].max())
    verdict = _verdict(x, spec, ["income", "log_income"])
    assert verdict.passes() and all(f.share - f.baseline < 0.02 for f in verdict.findings), verdict.findings


def test_codes_over_independent_continuous_columns_pass():
    rng = np.random.default_rng(3)
    x = rng.normal(size=(600, 4))
    verdict = _verdict(x, _codes(x, [1.0, -1.0, 0.8, 1.2], named=[0, 1, 2, 3]), ["t0", "t1", "t2", "t3"])
    assert verdict.passes(), verdict.findings
