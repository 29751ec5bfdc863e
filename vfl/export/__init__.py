"""Consented model export: a trained model, written in a format another tool loads, once its parties agree.

A vfl model lives in pieces: each party's shard (:mod:`vfl.deploy.shards`) holds that party's part and nothing
of the others'.  Exporting it whole (an XGBoost JSON model, an ONNX graph) puts every party's part in one file
for one party, the *recipient*; so every other data party first signs a consent for exactly that export
(:mod:`vfl.export.consent`).  The split export keeps each party's part with that party and gives the label
party a *combiner* that joins the parts' answers.  :mod:`vfl.export.assemble` checks the consents and writes the
files, for the estimators' ``export`` and for ``vfl export`` alike.  See docs/export.md.

The registry
------------
:data:`EXPORTERS` maps a family's word to the dotted name of its export module, as the family's entry in
:data:`vfl.families.FAMILIES` names it (``export``); a family is exportable once its entry names one.

The contract of a family's export module
----------------------------------------
Every module named in :data:`EXPORTERS` defines exactly these two names::

    FORMATS: dict[str, Callable[[dict[str, dict], Path], Path]]
    def split(shards: dict[str, dict], folder: Path, roles: dict[str, str] | None = None) -> dict[str, Path]

``shards`` always maps a party's name to what ``vfl.deploy.shards.<family>.read_shard`` returned for that
party: checked shards, never raw files from a peer.

* ``FORMATS[format](shards, path)`` writes the whole model, built from every data party's shard, to the
  file ``path`` and returns ``path``.  The format's word is its key (``"xgboost-json"``, ``"onnx"``, ...);
  ``"split"`` is never a key.  A writer that cannot build the model from the shards raises a
  :class:`~vfl.errors.DataError` naming the party and what is wrong.
* ``split(shards, folder, roles)`` writes into ``folder`` (which exists and is empty) one part per party in
  ``shards`` that has one, and, when the label party's shard is among them, ``"combiner.json"``: what the label
  party needs to turn the parts' answers into the model's prediction.  ``roles`` maps every data party of the
  model to its role (``"feature"``, ``"label"``) in the model's order, the feature parties first (the
  federation's roster: public to every party that consents); ``None`` means the shards' own, every party's shard
  being given.  A party's part is built from **its own shard alone**, and the combiner from the label party's
  shard and ``roles`` (its sum of parts, intercept, link, top model, in the order of ``roles``): neither holds
  another party's parameters, so each party exports its part on its own machine (``vfl export --format split``).
  Given every party's shard, ``split`` also makes the whole model's checks.  It returns ``{name: path}`` of what
  it wrote (a party's name for its part); the assembler finds the combiner by its file name, :data:`COMBINER`,
  and records in it (a JSON object) which shard each party consented to, under ``"consented"``.

Neither writes anything else, and neither checks consents: :mod:`vfl.export.assemble` does, before calling
them, and writes through a temporary name so that nothing is left at ``path`` or ``folder`` on any error.
A format a family's module does not list is not offered: :func:`formats` is what the estimators' and the
command's errors name.

The estimators
--------------
``consent`` and ``export`` are written once, in :class:`vfl.vertical_estimator.ModelExport` (every
``VerticalEstimator`` has them; another fitted model takes the class and names its ``_family``).  A family's
model gives ``_shards()``: every data party's shard by name, as the family's ``read_shard`` returns it (write
each with the family's ``write_shard``, with a fingerprint of the fit such as
:meth:`~vfl.vertical_estimator.VerticalEstimator._trained_with`, and read it back); the parties' roles and the
label party are read from the shards.  ``vfl export`` reads the party's own shard with ``read_shard`` and the
roles from ``federation.toml``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from vfl.errors import ConfigurationError
from vfl.families import FAMILIES

#: Each exportable family's export module, by the family's word (its registry entry's ``export``).
EXPORTERS: dict[str, str] = {name: family.export for name, family in FAMILIES.items() if family.export}

#: The format word of the split export (each party keeps its own part; the label party gets the combiner).
SPLIT = "split"
#: The name of the label party's combiner in a split export's folder.
COMBINER = "combiner.json"


def exporter(family: str) -> ModuleType:
    """The export module of ``family``; a :class:`ConfigurationError` naming the exportable families if none."""
    if family not in EXPORTERS:
        raise ConfigurationError(f"the {family} family has no export yet; the families that export are "
                                 f"{sorted(EXPORTERS)}")
    return importlib.import_module(EXPORTERS[family])


def formats(family: str) -> list[str]:
    """The formats ``family`` exports to: its whole-model formats, then ``"split"``."""
    return [*exporter(family).FORMATS, SPLIT]


def check_format(family: str, fmt) -> str:
    """``fmt`` if ``family`` exports to it, else a :class:`ConfigurationError` naming the formats it offers."""
    offered = formats(family)
    if not isinstance(fmt, str) or fmt not in offered:
        raise ConfigurationError(f"the {family} family does not export to {fmt!r}; it exports to {offered}")
    return fmt


def is_whole(fmt: str) -> bool:
    """Whether ``fmt`` puts every party's part in one file (every format but ``"split"``)."""
    return fmt != SPLIT
