"""``vfl predict``'s explanations: ``[prediction] explain`` and ``reasons`` in ``federation.toml``.

After its scores, every party of a prediction runs its family's explanation
(:mod:`vfl.runs.linear`, :mod:`vfl.runs.trees`: the programs the estimators' ``explain`` and
``predict_reasons`` run in threads), and the label party writes the answer beside the scores, one row per id:
the contributions that sum to the row's raw score (its own columns', one per feature party, ``base_value``)
and, with ``reasons = K``, ``reason_1`` .. ``reason_K``.  A feature party names one of its columns as a row's
reason only where its own ``reason_columns`` lets it (docs/explanations.md: what each party learns).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from vfl.deploy.config import Explanations, FederationConfig
from vfl.deploy.jsonfile import write_private_csv
from vfl.errors import DataError
from vfl.runs import explained


def sign(settings: Explanations, classes) -> float:
    """The adverse side the label party asks for: +1 or -1 with reasons (``adverse``, :func:`explained.adverse_sign`),
    0 for contributions only (the feature parties then name no column)."""
    return explained.adverse_sign(classes, settings.adverse) if settings.reasons else 0.0


def consent(config: FederationConfig, role: str, columns) -> dict:
    """Feature party ``role``'s ``reason_columns`` (``{column: code}``; its form checked with the file), checked
    against the columns of its model: a :class:`DataError`, which the party tells its peers before it stops."""
    return explained.consented(config.party(role).reason_columns or {}, columns, role, "its model",
                               f"fix [parties.{role}] reason_columns in {config.path}", DataError)


def path_beside(scores: str | Path) -> Path:
    """Where the explanations go: beside the scores CSV, ``NAME_explanations.csv``."""
    scores = Path(scores)
    return scores.with_name(f"{scores.stem}_explanations.csv")


def write(config: FederationConfig, scores, ids, result: dict, side: float) -> dict:
    """The label party's explanations CSV beside its ``scores`` (owner-only): ``id``, the contributions,
    ``base_value``, the reasons.  Returns what its summary says of them (``explanations``, ``reasons``)."""
    import pandas as pd

    settings, id_column = config.explanations, config.id_column
    table = explained.frame(result)
    if settings.reasons:
        table = pd.concat([table, explained.reasons(result, settings.reasons, side)], axis=1)
    if id_column in table.columns:
        table = table.rename(columns={id_column: f"{id_column}_contribution"})
    table.insert(0, id_column, np.asarray(ids))
    path = write_private_csv(table, path_beside(scores), index=False)
    return {"explanations": str(path), "reasons": settings.reasons}


def said(role: str, summary: dict) -> list[str]:
    """A party's line about the explanation it took part in: where the label party wrote it, what a feature
    party sent."""
    if "explanations" in summary:
        what = "explanations and reasons" if summary.get("reasons") else "explanations"
        return [f"party {role}: {what} of {summary['rows']} rows written to {summary['explanations']}"]
    if "explained" in summary:
        named = summary["explained"]["named"]
        codes = "; named as a row's reason: " + ", ".join(f"{code!r} for {n} rows" for code, n in named.items()) \
            if named else ""
        return [f"party {role}: sent its part of the explanation of {summary['explained']['rows']} rows{codes}"]
    return []
