"""The credit-scoring steps each party runs on its own: WOE/IV, selection, statistics, scorecard points.

* :mod:`~vfl.parties.credit.woe` — weight of evidence and information value from event counts.
* :mod:`~vfl.parties.credit.feature_party`, :mod:`~vfl.parties.credit.label_party` — the two sides of
  the encrypted event counts (the label party holds the key).
* :mod:`~vfl.parties.credit.selection` — which columns stay: IV threshold, top-k, correlation, VIF.
* :mod:`~vfl.parties.credit.statistics` — a party's own table statistics, population stability,
  the packed cross products of the encrypted Pearson correlation.
* :mod:`~vfl.parties.credit.scorecard` — the anchors (base score, base odds, points to double the
  odds) and points per bin.

Binning is :mod:`vfl.parties.binning`; the messages are sequenced by :mod:`vfl.protocols.credit`.
"""
