"""Each family's part of ``vfl serve``: its share of a model version, and its scoring round.

The registry names a family's scorer module (:attr:`vfl.families.Family.scorer`); the services never ask which
family a model is: they ask the module, or the share it reads.  A module has

* ``load_share(path, version, party, kind, features=())`` — party ``party``'s share of ``version`` from its shard
  at ``path`` (``kind``: its role, ``"feature"`` or ``"label"``; ``features``: the federation's feature parties),
  checked (:func:`vfl.serving.models.load_share` finds the path and asks this);
* ``score(service, share, ids, values, status, deadline, answers)`` — the label party's round: it takes the label
  party's service (:class:`vfl.serving.label.LabelService`: its links, its private tables, its layout and the
  round counter, ``ask``, ``query_tables``, ``require``, ``next_round``), the version's ``share``, the round's
  ids, the label party's own rows and their status, the deadline, and fills ``answers``, one per id;
* ``REQUEST``, ``REFUSED`` — the round request its feature party answers (``"score"``, ``"leaves"``,
  ``"part"``), and what a feature party of another model says when asked it (``{kind}``: that party's model).

A share (one class per family, in its module; plain attributes and methods, no base class) has

=========================================  ======================================================================
``kind``                                   its model's word on the wire: the ``/health`` answer's ``model``, a
                                           private table's ``model``, the metrics' label (data, never compared)
``version``, ``role``, ``columns``,        the version, the party's role, its columns, the training's fingerprint
``trained_with``, ``classes``              its peers must match, a classifier's classes (the label party's)
``complete``                               whether a row with a missing value cannot be scored
``keyed``                                  whether its partial scores travel under the coordinator's key (its
                                           private table waits for the key; a held table is checked against it)
``request``                                its module's ``REQUEST``
``width``                                  what its feature party's ``loaded`` answer says: values per row
``inline_null``, ``noun``                  whether ``/score`` takes ``null`` among inline features, and what
                                           a refusal calls the model ("a linear model needs every value")
``reason_sign``, ``own_reasons``           reasons' adverse side (0: none); whether it gives reasons of its own
                                           whatever ``[serving] reasons`` says (the scorecard)
``check_release(service, version,``        the feature party, at ``load``: its release checks over its store
``consent, sign, tables)``                 (:mod:`vfl.protocols.release`), before it answers for any row
``loaded_fields(role, sign)``              the fields its ``loaded`` answer adds (``sign``: reasons asked)
``answer(service, message)``               the feature party's answer to a round's ``request``
                                           (:class:`vfl.serving.feature.FeatureService`: ``rows``, ``key``,
                                           ``noised``, ``masks``)
``payloads(values, status, layout,``       its private table's payload per row (:mod:`vfl.serving.private`)
``frac_bits, noise)``
``by_id_only(n_features)``                 why its rounds cannot be private queries ("" if they can)
``take_loaded(peer, answer, width,``       the label party: what it checks and keeps of a feature party's
``role)``                                  ``loaded`` answer (widths, the reasons' fields)
``unexplained(n_features)``                the label party: why ``vfl serve`` never explains it ("" if it may)
``check_explainable()``                    the label party: a :class:`~vfl.errors.ConfigurationError` (or
                                           ``DataError``) if this version's rounds cannot give reasons
``outcome(z)``                             one id's answer from its raw scores (:func:`vfl.serving.answers.classified`)
``drift()`` (a label party's, if it has    population stability of the rows served so far against training's,
one: the scorecard's)                      per own column (``/metrics``' ``vfl_serve_psi``)
=========================================  ======================================================================

The families:

* :mod:`~vfl.serving.scorers.linear` — linear models: encrypted partial scores, summed, one masked decryption;
* :mod:`~vfl.serving.scorers.credit` — the scorecard: the linear round, each feature party's total decrypted on
  its own for the reasons;
* :mod:`~vfl.serving.scorers.trees` — trees: each feature party's leaf masks;
* :mod:`~vfl.serving.scorers.mlp` — split networks: the feature parties' masked parts of the interactive layer.

A fifth family's serving is one module here with these, named by its registry entry.
"""
