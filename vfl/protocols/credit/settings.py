"""The settings every party of a credit-scoring pipeline shares (``[pipeline]`` in federation.toml).

Binning (``max_bins``, ``strategy``, ``label_strategy``, ``min_bin_fraction``),
the WOE step's ``share_woe``, the selection rules
(:class:`~vfl.parties.credit.selection.SelectionRules`) and the scorecard's
anchors (:class:`~vfl.parties.credit.scorecard.ScorecardScale`).  The model's
settings are ``[training]``'s (logistic regression), its key size the WOE
step's too.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from vfl.errors import ConfigurationError
from vfl.parties.binning import check_max_bins, check_strategy
from vfl.parties.credit.scorecard import ScorecardScale
from vfl.parties.credit.selection import SelectionRules


def check_scorecard_model(protocol: str, reveal: str, where: str) -> None:
    """The scorecard turns each party's weights into its points: refuse a model no party will hold weights of."""
    if protocol == "shared" and reveal == "never":
        raise ConfigurationError(f"{where}: the scorecard turns each party's weights into its own points, and with "
                                 "protocol = 'shared' and reveal = 'never' no party holds its weights: use "
                                 "reveal = 'respectively' (or leave it out)")


@dataclass(frozen=True)
class CreditSettings:
    """Shared settings of the pipeline's steps before and after the model."""

    max_bins: int = 10
    strategy: str = "quantile"
    label_strategy: str = "monotone"
    min_bin_fraction: float = 0.05
    share_woe: bool = False
    rules: SelectionRules = field(default_factory=SelectionRules)
    scale: ScorecardScale = field(default_factory=ScorecardScale)

    def __post_init__(self):
        check_max_bins(self.max_bins)
        if check_strategy(self.strategy) == "monotone":
            raise ConfigurationError("strategy is every party's; only the label party bins monotonically "
                                     "(label_strategy = \"monotone\")")
        check_strategy(self.label_strategy)
        if not isinstance(self.share_woe, bool):
            raise ConfigurationError(f"share_woe must be true or false, got {self.share_woe!r}")
        if isinstance(self.min_bin_fraction, bool) or not isinstance(self.min_bin_fraction, (int, float)) \
                or not 0 <= self.min_bin_fraction < 0.5:
            raise ConfigurationError(f"min_bin_fraction must be a number in [0, 0.5), got {self.min_bin_fraction!r}")

    @classmethod
    def from_table(cls, table: dict) -> "CreditSettings":
        """From ``[pipeline]``'s keys (every key optional; TOML has no null: a rule left out is off)."""
        rules = {k: table.pop(k) for k in list(table) if k in SelectionRules.__dataclass_fields__}
        scale = {k: table.pop(k) for k in list(table) if k in ScorecardScale.__dataclass_fields__}
        if "iv_threshold" not in rules:
            rules["iv_threshold"] = SelectionRules.iv_threshold
        unknown = sorted(set(table) - {"max_bins", "strategy", "label_strategy", "min_bin_fraction", "share_woe"})
        if unknown:
            raise ConfigurationError(f"unknown key(s) {unknown}")
        return cls(rules=SelectionRules(**rules), scale=ScorecardScale(**scale), **table)

    @staticmethod
    def keys() -> set:
        return ({"max_bins", "strategy", "label_strategy", "min_bin_fraction", "share_woe"}
                | set(SelectionRules.__dataclass_fields__) | set(ScorecardScale.__dataclass_fields__))

    def to_dict(self) -> dict:
        return {"max_bins": self.max_bins, "strategy": self.strategy, "label_strategy": self.label_strategy,
                "min_bin_fraction": self.min_bin_fraction, "share_woe": self.share_woe, **self.rules.to_dict(),
                **self.scale.to_dict()}
