"""What a face hands a family's run besides the party's data: one type for every family and role.

Every run has one call shape, ``train_<role>(ep, data, settings, roster, hooks=Hooks())`` and
``predict_<role>(ep, ..., roster, hooks=Hooks())``: the estimators fill the hooks with their
progress bars and fitted attributes, ``vfl party`` with its checkpoint store, narration and
release ledger.  A run reads only the hooks its family has; the others stay at their defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping


@dataclass(frozen=True)
class Hooks:
    """The hooks of one role's run.  Each attribute says which family reads it; every one is optional.

    Attributes
    ----------
    checkpoints : mapping of int to dict, optional
        The party's saved states by completed step (epoch or iteration), to resume from (trees, mlp).
        Linear's are per model: ``on_model`` gives them.
    on_step : callable, optional
        ``on_step(step, state)`` after every completed step: progress, narration, checkpoint saving
        (trees: iterations, at every data party; mlp: epochs, at every data party).
    on_model : callable, optional
        Linear (one model, or one per class): ``on_model(index, n_models, classes)`` -> that model's
        ``(checkpoints, on_step)`` (:data:`vfl.runs.linear.OnModel`), at every role.
    start : object, optional
        Where training starts: mlp, the party's starting weights (by default it draws its own secret
        start); linear, a warm start (:class:`vfl.runs.linear.WarmStart`: the previous weights per model
        and the scaling they were trained with).
    engine : str, optional
        The crypto engine (linear, trees, credit; the split network encrypts nothing).
    release : ReleasePolicy, optional
        A feature party's release policy (:mod:`vfl.protocols.release`): what it checks before its
        partial results leave it, after training and at prediction (linear, trees, mlp).
    columns : callable, optional
        Linear: the column-count exchange before any model,
        ``columns(ep, n_rows, n_columns, settings, roster, separate_validation)``; by default
        :class:`vfl.runs.linear.ShareColumns` (message ``columns`` and the checks on every count).
    validation : callable, optional
        Linear: ``validation(index, n_models, party, trained)`` gives a model's party its separate
        validation rows (the estimator's ``fit(validation=...)``).
    on_party : callable, optional
        Trees, the label party: ``on_party(party)`` once its party is built (a progress bar reads its loss).
    on_batch_loss : callable, optional
        Linear, the coordinator: ``on_batch_loss(epoch, batch, loss)`` after every batch loss it decrypts.
    """

    checkpoints: Mapping[int, dict] | None = None
    on_step: Callable | None = None
    on_model: Callable | None = None
    start: Any = None
    engine: str | None = None
    release: Any = None
    columns: Callable | None = None
    validation: Callable | None = None
    on_party: Callable | None = None
    on_batch_loss: Callable | None = None


#: No hooks: a run with none of them (every default).
NO_HOOKS = Hooks()
