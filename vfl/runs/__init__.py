"""One run per model family and role, used alike by the estimators (threads) and ``vfl party`` (processes).

* :mod:`~vfl.runs.data` — :class:`RoleData`, one party's rows as every run takes them.
* :mod:`~vfl.runs.hooks` — :class:`Hooks`, what a face hands every run besides the data.
* :mod:`~vfl.runs.threads` — every role's program in its own thread over the in-process transport.
* :mod:`~vfl.runs.linear` — linear and logistic regression (one-vs-rest, warm start, the shared protocol).
* :mod:`~vfl.runs.trees` — gradient-boosted trees (SecureBoost): each role's training and prediction run.
* :mod:`~vfl.runs.credit` — the credit-scoring pipeline's run: binning, WOE/IV, selection, model columns, points.
* :mod:`~vfl.runs.mlp` — split neural networks: each role's training and prediction run.

Which run a family has is its entry in :mod:`vfl.families`.

Every family's run has one call shape: ``train_<role>(ep, data, settings, roster, hooks=Hooks())`` and
``predict_<role>(ep, ..., roster, hooks=Hooks())`` — the party's name is ``ep.role``; the
:class:`~vfl.runs.hooks.Hooks` (:mod:`~vfl.runs.hooks`) are what the face adds: ``checkpoints`` (the saved
states by step) resume a run; ``on_step(step, state)`` follows every epoch or iteration (checkpoints,
progress, narration); ``release`` is a feature party's release policy; ``engine`` the crypto engine;
``start`` a start or warm start.  The linear run trains one model per class and asks
``on_model(index, n_models, classes)`` for each model's ``(checkpoints, on_step)``; its column-count exchange
(``columns``) is a step the credit pipeline replaces with its own.

A family's run takes one party's data and the shared settings, builds the party, checks what the party
checks, and runs the family's protocol program for its role; the estimators hand it in-process endpoints,
``vfl party`` the endpoint of its TLS session.
"""
