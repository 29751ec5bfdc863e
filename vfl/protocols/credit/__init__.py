"""The credit-scoring steps between parties, one program per role, the label party holding the key.

* :mod:`vfl.protocols.credit.woe` — every party's columns' WOE and IV from encrypted event counts
  per anonymous bin, and the selection plan.
* :mod:`vfl.protocols.credit.pearson` — the Pearson correlations between two parties' columns,
  computed under encryption.
* :mod:`vfl.protocols.credit.selection` — the label party selects by IV (and correlation or VIF);
  every party learns its own plan.
"""

from vfl.protocols.credit.pearson import pearson_holder, pearson_peer
from vfl.protocols.credit.selection import select_feature, select_label
from vfl.protocols.credit.woe import receive_plan, run_feature, run_label, send_plan, woe_feature, woe_label

__all__ = ["pearson_holder", "pearson_peer", "receive_plan", "run_feature", "run_label", "select_feature",
           "select_label", "send_plan", "woe_feature", "woe_label"]
