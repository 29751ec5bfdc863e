"""Online scoring: every party a long-lived service, the label party's HTTP API (``vfl serve``).

See docs/serving.md.  The modules, from the wire up: :mod:`~vfl.deploy.serving_settings`
(``[serving]``), :mod:`~vfl.serving.store` (each party's rows by id),
:mod:`~vfl.serving.models` (versioned shards), :mod:`~vfl.serving.messages` and
:mod:`~vfl.serving.links` (the parties' links and messages),
:mod:`~vfl.serving.rounds` (a linear model's round, party by party), the three
roles (:mod:`~vfl.serving.feature`, :mod:`~vfl.serving.coordinator`,
:mod:`~vfl.serving.label`), and the label party's HTTP side
(:mod:`~vfl.serving.batching`, :mod:`~vfl.serving.metrics`, :mod:`~vfl.serving.api`),
its tokens (:mod:`~vfl.serving.auth`), its Python client (:mod:`~vfl.serving.client`) and the command
(:mod:`~vfl.serving.cli`).  Private queries: :mod:`~vfl.serving.private`.  What differs by family (its share of a
model version, its round, its payloads, answers and reasons) is its scorer, :mod:`vfl.serving.scorers`, which
the family's entry in :mod:`vfl.families` names.
"""
