"""``[serving]`` in ``federation.toml``: each party's service settings, local like ``[network]``.

Keys in ``[serving]`` apply to every party that reads the file; a
``[serving.NAME]`` table to party NAME only (its store, its HTTP address)::

    [serving]
    deadline_ms = 2000            # a request's default deadline (it may ask for less, up to max_deadline_ms)
    batch_wait_ms = 2             # how long the label party gathers concurrent requests into one round
    max_batch = 256               # ids in one round at most
    max_rounds = 4                # rounds under way at once
    max_ids = 1000                # ids in one request at most
    keep_versions = 2             # model versions each party keeps loaded (the current one and the last)
    queries = "auto"              # "private": no feature party learns which ids are scored; "by_id"; "auto": private
                                  # wherever the model allows it (all but split networks of two feature parties or more)

    [serving.bank]                # the label party
    http = "127.0.0.1:8080"       # its HTTP API (localhost by default: put a reverse proxy in front)
    token_file = "score.token"    # the bearer token of /score and /metrics (required off localhost)
    admin_token_file = "admin.token"  # the bearer token of /admin/reload (another one)
    allow_inline_features = false # requests may carry the label party's features (a client then learns its weights)
    reasons = 4                   # each answer's reason codes, at most 4 (linear models, trees; default 0: none)
    reasons_adverse = "yes"       # the class (a regressor: "high" or "low") reasons push toward (default: the second)
    models = "models"             # a folder with one sub-folder per model version: models/3/model_bank.json
    version = "3"                 # the version to start with (default: the last by name)
    store = "sqlite:///bank.db"   # optional for the label party: requests may carry its features inline

    [serving.telco]
    models = "models"
    store = "sqlite:///telco.db"  # any SQLAlchemy URL, or a CSV file
    table = "features"            # the store's table (or view) of rows, one per id

Nothing here is shared or fingerprinted: the parties compare only the model
settings (``[training]``, ``[prediction]``, names and roles) when they link.
Paths (``models``, a CSV store, a relative ``sqlite:///`` database) are
relative to the federation file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path

from vfl.errors import ConfigurationError
from vfl.transport.network import parse_address

#: A model version's name: also a folder name, so no separators and no leading dot.
VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}\Z")

_INTS = {"deadline_ms": (1, 600_000), "max_deadline_ms": (1, 600_000), "max_batch": (1, 100_000),
         "max_rounds": (1, 64), "max_ids": (1, 100_000), "keep_versions": (1, 16), "max_queue": (1, 1_000_000),
         "request_timeout_ms": (100, 600_000), "idle_timeout_ms": (100, 3_600_000)}
_PATHS = ("token_file", "admin_token_file")
KEYS = {"http", "models", "version", "store", "table", "batch_wait_ms", "allow_inline_features", "queries", *_PATHS,
        *_INTS, "reasons", "reasons_adverse"}
#: ``reasons``: reason codes per answer at most (adverse-action notices name up to four).
MAX_REASONS = 20
#: ``queries``: how the label party asks the feature parties about an id (docs/serving.md, "Private queries").
QUERIES = ("auto", "private", "by_id")


def check_version(name, where: str = "model version") -> str:
    """A version name (letters, digits, ``.``, ``_``, ``-``; at most 64), else a :class:`ConfigurationError`."""
    if not isinstance(name, str) or not VERSION.match(name) or ".." in name:
        raise ConfigurationError(f"{where}: {name!r} is not a model version name: use 1 to 64 letters, digits, "
                                 "'.', '_' or '-', starting with a letter or digit")
    return name


@dataclass(frozen=True)
class ServingSettings:
    """One party's ``[serving]`` settings (see the module's docstring for each key)."""

    http: tuple[str, int] = ("127.0.0.1", 8080)
    models: Path = Path("models")
    version: str | None = None
    store: str | None = None
    table: str = "features"
    deadline_ms: int = 2000
    max_deadline_ms: int = 30_000
    batch_wait_ms: float = 2.0
    max_batch: int = 256
    max_rounds: int = 4
    max_ids: int = 1000
    keep_versions: int = 2
    #: ids waiting for a round at most; beyond, requests are refused at once (503) rather than queued
    max_queue: int = 20_000
    #: files holding the bearer tokens of the HTTP API (see :mod:`vfl.serving.auth`); None: none (or the environment)
    token_file: Path | None = None
    admin_token_file: Path | None = None
    #: whether a request may carry the label party's own features (off: a client could solve for its weights)
    allow_inline_features: bool = False
    #: milliseconds a client has to send a whole request, head and body, once it starts (else 408, closed)
    request_timeout_ms: int = 5000
    #: milliseconds an HTTP connection may stay idle between requests before it is closed
    idle_timeout_ms: int = 5000
    #: the label party: ``"private"`` (the feature parties learn how many ids, not which: :mod:`vfl.serving.private`),
    #: ``"by_id"`` (they look the ids up), ``"auto"`` (private where the model allows); a feature party: ``"private"``
    #: refuses to be asked by id, the others answer both
    queries: str = "auto"
    #: the label party: reason codes per answer at most (0: none; docs/serving.md, "Reason codes")
    reasons: int = 0
    #: the label party: the adverse side its reasons push toward, a class (default: the second, as ``predict_reasons``)
    #: or a regressor's ``"high"`` / ``"low"``; checked against the model's classes at load
    reasons_adverse: str | int | None = None

    def with_options(self, **options) -> "ServingSettings":
        """These settings with the command line's options (those not ``None``)."""
        return replace(self, **{k: v for k, v in options.items() if v is not None})


def parse_serving(where: str, table: dict, names, base: Path) -> dict[str, ServingSettings]:
    """Every party's :class:`ServingSettings` from the ``[serving]`` table (``names``: the parties).

    Raises
    ------
    ConfigurationError
        An unknown key or party, or a value of the wrong type or out of range.
    """
    common = {k: v for k, v in table.items() if not isinstance(v, dict)}
    own = {k: v for k, v in table.items() if isinstance(v, dict)}
    _unknown(f"{where} [serving]", common, "or a [serving.NAME] table for party NAME")
    for name in own:
        if name not in names:
            raise ConfigurationError(f"{where}: [serving.{name}] names no party; the parties are {sorted(names)}")
    out = {}
    for name in names:
        here = f"{where} [serving.{name}]" if name in own else f"{where} [serving]"
        _unknown(here, own.get(name, {}))
        out[name] = _settings(here, dict(common, **own.get(name, {})), base)
    return out


def _unknown(where: str, table: dict, more: str = "") -> None:
    if "reason_columns" in table:
        raise ConfigurationError(f"{where}: reason_columns is a feature party's consent to be named in reasons, one "
                                 "key for vfl predict and vfl serve alike: put it in the party's own [parties.NAME] "
                                 "table")
    extra = sorted(set(table) - KEYS)
    if extra:
        raise ConfigurationError(f"{where}: unknown key(s) {extra}; expected some of {sorted(KEYS)}"
                                 + (f" {more}" if more else ""))


def _settings(where: str, values: dict, base: Path) -> ServingSettings:
    out = {}
    for key, (low, high) in _INTS.items():
        if key in values:
            value = values[key]
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigurationError(f"{where}: {key} must be a whole number from {low} to {high}, got {value!r}")
            out[key] = value
    if "batch_wait_ms" in values:
        wait = values["batch_wait_ms"]
        if isinstance(wait, bool) or not isinstance(wait, (int, float)) or not 0 <= wait <= 1000:
            raise ConfigurationError(f"{where}: batch_wait_ms must be a number of milliseconds from 0 to 1000, "
                                     f"got {wait!r}")
        out["batch_wait_ms"] = float(wait)
    if "http" in values:
        if not isinstance(values["http"], str):
            raise ConfigurationError(f"{where}: http must be \"host:port\", got {values['http']!r}")
        try:
            out["http"] = parse_address(values["http"])
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where}: http: {exc}") from None
    if "allow_inline_features" in values:
        if not isinstance(values["allow_inline_features"], bool):
            raise ConfigurationError(f"{where}: allow_inline_features must be true or false, got "
                                     f"{values['allow_inline_features']!r}")
        out["allow_inline_features"] = values["allow_inline_features"]
    if "queries" in values:
        if values["queries"] not in QUERIES:
            raise ConfigurationError(f"{where}: queries must be one of {list(QUERIES)}, got {values['queries']!r}")
        out["queries"] = values["queries"]
    if "reasons" in values:
        out["reasons"] = _reasons(where, values["reasons"])
    if "reasons_adverse" in values:
        adverse = values["reasons_adverse"]
        if isinstance(adverse, bool) or not isinstance(adverse, (str, int)):
            raise ConfigurationError(f"{where}: reasons_adverse must be a class of the model's label (text or a whole "
                                     f"number), or \"high\" / \"low\" for a regressor, got {adverse!r}")
        out["reasons_adverse"] = adverse
    for key in ("models", "store", "table", "version", *_PATHS):
        if key in values and (not isinstance(values[key], str) or not values[key]):
            raise ConfigurationError(f"{where}: {key} must be a non-empty string, got {values[key]!r}")
    out["models"] = resolve_path(values.get("models", "models"), base)
    if "store" in values:
        out["store"] = resolve_store(values["store"], base)
    for key in _PATHS:
        if key in values:
            out[key] = resolve_path(values[key], base)
    if "table" in values:
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_.]{0,127}\Z", values["table"]):
            raise ConfigurationError(f"{where}: table must be a table name (letters, digits, '_', a schema's '.'), "
                                     f"got {values['table']!r}")
        out["table"] = values["table"]
    if "version" in values:
        out["version"] = check_version(values["version"], f"{where}: version")
    settings = ServingSettings(**out)
    if settings.deadline_ms > settings.max_deadline_ms:
        raise ConfigurationError(f"{where}: deadline_ms ({settings.deadline_ms}) is above max_deadline_ms "
                                 f"({settings.max_deadline_ms})")
    return settings


def _reasons(where: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_REASONS:
        raise ConfigurationError(f"{where}: reasons must be a whole number from 0 to {MAX_REASONS} (the reason codes "
                                 f"each answer gives at most; 0: none), got {value!r}")
    return value


def resolve_path(value: str, base: Path) -> Path:
    """A path of the federation file: relative to the file's folder."""
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def resolve_store(value: str, base: Path) -> str:
    """A store: a SQLAlchemy URL (a relative ``sqlite:///`` file made relative to ``base``) or a CSV path."""
    if "://" not in value:
        return str(resolve_path(value, base))
    prefix = "sqlite:///"
    if value.startswith(prefix) and value != prefix and not value[len(prefix):].startswith(("/", ":memory:")):
        return prefix + str(resolve_path(value[len(prefix):], base))
    return value
