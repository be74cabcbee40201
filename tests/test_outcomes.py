"""Won, tied or lost by the paired test over seeds (dmh.experiments.outcomes)."""

import math
from collections import Counter

import pytest

from dmh.experiments.outcomes import field_outcome, outcome_counts_text, paired_outcome


def test_a_difference_beyond_two_standard_errors_wins_and_within_them_ties():
    own = {0: 0.50, 1: 0.52, 2: 0.51, 3: 0.53, 4: 0.50}
    # differences 0.010, 0.012, 0.008, 0.011, 0.009: mean 0.010, sd 0.00158, se 0.000707
    rival = {0: 0.49, 1: 0.508, 2: 0.502, 3: 0.519, 4: 0.491}
    c = paired_outcome(own, rival)
    assert c.n == 5 and c.diff == pytest.approx(0.010) and c.se == pytest.approx(0.00158114 / math.sqrt(5), rel=1e-4)
    assert c.outcome == "won" and paired_outcome(rival, own).outcome == "lost"
    # the same mean difference with a spread of +-0.03 over seeds is inside the noise
    noisy = {0: 0.46, 1: 0.54, 2: 0.48, 3: 0.54, 4: 0.46}  # differences 0.04, -0.02, 0.03, -0.01, 0.04
    c = paired_outcome(own, noisy)
    assert c.diff == pytest.approx(0.016) and c.outcome == "tied"


def test_the_threshold_is_z_standard_errors():
    own = {0: 0.50, 1: 0.52, 2: 0.51}
    rival = {0: 0.49, 1: 0.50, 2: 0.50}  # differences 0.01, 0.02, 0.01: mean 0.0133, se 0.00333 (4 se)
    assert paired_outcome(own, rival, z=3.9).outcome == "won"
    assert paired_outcome(own, rival, z=4.1).outcome == "tied"


def test_only_shared_seeds_are_compared_and_one_seed_is_not_tested():
    assert paired_outcome({0: 0.5, 1: 0.6, 7: 0.9}, {0: 0.4, 1: 0.5, 9: 0.1}).n == 2
    one = paired_outcome({0: 0.6}, {0: 0.5})
    assert one.outcome == "untested" and one.n == 1 and math.isnan(one.se)
    assert paired_outcome({0: 0.6}, {1: 0.5}).outcome == "untested"


def test_equal_rows_tie():
    row = {0: 0.51234, 1: 0.6}
    assert paired_outcome(row, dict(row)).outcome == "tied"
    # equal to 4 decimals
    assert paired_outcome(row, {0: 0.51231, 1: 0.60001}).outcome == "tied"


def test_against_a_field_a_loss_to_any_rival_is_a_loss_and_a_win_needs_every_rival():
    own = {0: 0.50, 1: 0.52, 2: 0.51}
    below = {s: v - 0.05 for s, v in own.items()}
    above = {s: v + 0.05 for s, v in own.items()}
    noisy = {0: 0.45, 1: 0.56, 2: 0.52}
    assert field_outcome(own, {"a": below}).outcome == "won"
    assert field_outcome(own, {"a": below, "b": noisy}).outcome == "tied"
    f = field_outcome(own, {"a": below, "b": noisy, "c": above})
    assert f.outcome == "lost" and f.lost_to == ["c"]
    assert field_outcome(own, {}).outcome == "untested"


def test_counts_text():
    assert outcome_counts_text(Counter(won=3, tied=1, lost=2)) == "won 3, tied 1, lost 2 of 6"
    assert outcome_counts_text(Counter(won=1, untested=2)) == "won 1, tied 0, lost 0, untested 2 of 3"
