"""The scorecard's explanations: each column's contribution is its points' distance from their training mean."""

import numpy as np
import pytest

from vfl import ConfigurationError, VerticalLogisticRegression
from vfl.preprocessing import VerticalBinning, VerticalPipeline, VerticalScorecard, VerticalSelection, VerticalWOE

from tests.credit_data import credit_data

KEYS = {"key_bits": 1024, "insecure": True}
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def pipeline(allow=("telco",), reason_columns=None, share_woe=False):
    return VerticalPipeline([
        ("woe", VerticalWOE(VerticalBinning(max_bins=8), share_woe=share_woe, **KEYS)),
        ("selection", VerticalSelection(max_correlation=0.9)),
        ("scorecard", VerticalScorecard(VerticalLogisticRegression(**KEYS, allow_reconstruction=list(allow)),
                                        reason_columns=reason_columns))])


@pytest.mark.parametrize("share_woe", [False, True])
def test_contributions_are_the_points_less_their_training_mean_over_the_factor(share_woe):
    data = credit_data(n=800)
    pipe = pipeline(share_woe=share_woe).fit(data)
    card = pipe.named_steps["scorecard"]
    through = pipe._through(data)
    explained = pipe.explain(data)
    z = pipe.decision_function(data)
    np.testing.assert_allclose(explained.sum(axis=1), z, atol=1e-6)
    # the pooled reference: each column's points per row (the scorecard's own table), centred on the training rows
    for party in card.parties_:
        codes = card._codes(through, party)
        coder = card.coders_[party]
        per_column = {coder.columns[j]: card.points_[party][coder.columns[j]][codes[:, j]] for j in coder.selected}
        expected = {c: -(p - p.mean()) / card.scale_.factor for c, p in per_column.items()}
        if party == data.label_party:
            for column, values in expected.items():
                np.testing.assert_allclose(explained[column], values, atol=1e-6)
        else:
            np.testing.assert_allclose(explained[party], sum(expected.values()), atol=1e-6)


def test_a_scorecard_part_is_refused_without_the_opt_in_and_reasons_name_consented_columns():
    data = credit_data(n=800)
    pipe = pipeline(allow=()).fit(data)
    with pytest.raises(ConfigurationError, match="party telco: releasing its part of each score"):
        pipe.explain(data)
    pipe = pipeline(reason_columns={"telco": {"calls": "CALLS-01"}}).fit(data)
    reasons = pipe.predict_reasons(data, k=2)
    flat = {v for v in reasons.stack().tolist() if isinstance(v, str)}
    assert "CALLS-01" in flat and "tenure" not in flat
    assert flat <= {"CALLS-01", "information from telco", "income", "utilization", "age"}
    with pytest.raises(ConfigurationError,
                       match="party telco: its reason_columns names 'nope', a column its model does not have"):
        pipe.named_steps["scorecard"].set_params(reason_columns={"telco": ["nope"]})
        pipe.predict_reasons(data)
