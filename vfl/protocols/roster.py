"""Who plays which role: users name the parties ("bank", "telco"); the protocol knows roles.

A federation has one *label party* (B: columns and the labels), one *coordinator*
(C: the key pair) and any number ``K >= 1`` of *feature parties* (columns only).
Gradient boosting has no coordinator (the label party holds the key pair): its
roster's ``coordinator`` is ``None``.
The names are the transport's role names, so transcripts, errors and narration
speak of "telco", not of "A2".  Yang et al. 2019's two-party setting is
:data:`TWO_PARTY`: feature party "A", label party "B", coordinator "C".

Feature parties talk only to the label party and the coordinator, never to each
other (:meth:`Roster.peers`).
"""

from __future__ import annotations

from dataclasses import dataclass

from vfl.errors import ConfigurationError


@dataclass(frozen=True)
class Roster:
    """The parties of one federation, by role.

    Parameters
    ----------
    features : tuple of str
        The feature parties, in a fixed order every party agrees on.
    label : str
        The label party.
    coordinator : str or None
        The key holder of the linear protocols; ``None`` for gradient boosting.
    """

    features: tuple[str, ...] = ("A",)
    label: str = "B"
    coordinator: str | None = "C"

    def __post_init__(self):
        object.__setattr__(self, "features", tuple(self.features))
        names = self.everyone
        if not self.features:
            raise ConfigurationError("a federation needs at least one feature party besides the label party")
        if not all(isinstance(n, str) and n for n in names):
            raise ConfigurationError(f"party names must be non-empty strings, got {list(names)}")
        repeated = sorted({n for n in names if names.count(n) > 1})
        if repeated:
            raise ConfigurationError(f"party name(s) {repeated} given to more than one role")

    @property
    def data_parties(self) -> tuple[str, ...]:
        """The parties holding rows: the feature parties, then the label party."""
        return (*self.features, self.label)

    @property
    def everyone(self) -> tuple[str, ...]:
        return (*self.features, self.label) + ((self.coordinator,) if self.coordinator is not None else ())

    def role_of(self, name: str) -> str:
        """``"feature"``, ``"label"`` or ``"coordinator"``."""
        if name == self.label:
            return "label"
        if self.coordinator is not None and name == self.coordinator:
            return "coordinator"
        if name in self.features:
            return "feature"
        raise ConfigurationError(f"no party named {name!r}; the parties are {list(self.everyone)}")

    def peers(self, name: str) -> tuple[str, ...]:
        """Whom ``name`` exchanges messages with: a feature party only with B and C."""
        if self.role_of(name) == "feature":
            return tuple(n for n in (self.label, self.coordinator) if n is not None)
        return tuple(n for n in self.everyone if n != name)

    def without_coordinator(self) -> "Roster":
        """The same data parties with no coordinator (gradient boosting)."""
        return Roster(self.features, self.label, None)


#: Yang et al.'s three parties: A (features), B (features and labels), C (coordinator).
TWO_PARTY = Roster(("A",), "B", "C")
