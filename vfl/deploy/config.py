"""``federation.toml``: who the parties are, where they listen, and the settings they share.

Every machine keeps a copy of the same file; each party reads only its own
certificate and key from it (the others' entries may point nowhere).  A
federation has one *label party* (feature columns and the labels), one
*coordinator* (the Paillier key pair) and one or more *feature parties*
(feature columns only); each ``[parties.NAME]`` table gives its role::

    [federation]
    ca = "certs/ca.pem"                 # paths are relative to this file
    crl = "certs/crl.pem"               # optional: the CA's revocation list (vfl certs revoke), or an array of them

    [parties.bank]
    role = "label"                      # "feature", "label" or "coordinator"
    address = "10.0.0.1:7001"           # host:port this party listens on (if another party dials it)
    certificate = "certs/bank.pem"
    key = "certs/bank.key"              # only party bank needs this file
    [parties.telco]
    role = "feature"
    address = "10.0.0.2:7002"
    certificate = "certs/telco.pem"
    key = "certs/telco.key"
    allow_reconstruction = false        # true: telco releases per-row outputs (scores, split sides, a network's
                                        # part) even where its release check finds bank could rebuild its columns
    release_epsilon = 4.0               # optional: differential privacy on every per-row release (noise per row
                                        # and version; release_delta, release_clip, release_budget beside it)
    reason_columns = ["calls"]          # optional: the columns telco lets an explanation name as a row's reason
                                        # (or a table of column = "its published code"); read by telco only
    [parties.shop]
    role = "feature"
    address = "10.0.0.3:7003"
    certificate = "certs/shop.pem"
    key = "certs/shop.key"
    ca = "cas/shop-ca.pem"              # optional: shop's own CA signs shop's certificate (not the federation's)
    fingerprint = "sha256:3f2a..."      # optional: the one certificate shop may present (vfl certs fingerprint)
    crl = "cas/shop-crl.pem"            # optional: shop's CA's revocation list
    [parties.C]
    role = "coordinator"
    address = "10.0.0.4:7004"
    certificate = "certs/C.pem"
    key = "certs/C.key"

    [training]                          # shared: compared between parties at connect
    model = "logistic"                  # or "linear"
    solver = "auto"                     # "cg" (full batch, L2) where it applies, else "gd" (learning_rate...)
    standardize = true                  # each data party scales its own columns (kept in its model shard)
    learning_rate = 0.15                # solver "gd"
    iterations = 100                    # epochs ("cg": steps, one encrypted pass each)
    batch_size = 0                      # 0: full batch
    alpha = 0.01
    tol = 1e-5                          # 0: always run every iteration
    fit_intercept = true
    key_bits = 2048
    insecure = false                    # must be true for key_bits < 2048
    frac_bits = 32
    random_state = 0                    # batch-order seed; leave out to let the label party draw one
    packing = "auto"                    # several values per ciphertext (training and prediction); "auto":
                                        # wherever it applies (not with row weights), or true / false
    score_bound = 4096                  # declared |share of a score| per party (packed slots are sized for it)
    feature_bound = 256                 # declared |x| (packed slots are sized for it)
    warm_start = false                  # true: every data party continues from its shard in its work folder
    report_metrics = true               # the label party's metrics on its training rows, by private prediction

    [prediction]
    mode = "private"                    # or "table3" (teaching only: the coordinator sees partial scores)
    explain = true                      # optional: vfl predict explains every score (explanations.csv at bank)
    reasons = 4                         # optional: and names each row's 4 main reasons (docs/explanations.md)

For gradient-boosted trees (SecureBoost), ``[training]`` names the model and
takes the estimators' parameters instead (:class:`~vfl.protocols.trees.TreeSettings`);
the label party holds the key, so no coordinator is needed (a ``coordinator``
entry may stay in the file: it takes no part)::

    [training]
    model = "gradient_boosting"
    loss = "log_loss"                   # or "squared_error"
    iterations = 50                     # boosting iterations (max_iter)
    learning_rate = 0.3
    max_depth = 3                       # and/or max_leaf_nodes
    max_bins = 32
    l2_regularization = 0.0
    min_samples_leaf = 20
    min_child_weight = 0.001
    early_stopping = false              # or true, "auto"
    hide_membership = false             # true: no feature party learns any row's node
    label_party_trees = 1               # the first trees split on the label party's columns only
    key_bits = 2048

A split neural network (docs/mlp.md) takes scikit-learn's ``MLPClassifier``
names (:class:`~vfl.protocols.mlp.MLPSettings`).  Its coordinator deals the
masks and Beaver triples, so the file names one; ``task`` is required (every
party, the coordinator included, sizes its messages by it before the label
party reads a label)::

    [training]
    model = "mlp"
    task = "binary"                     # or "multiclass", "regression"
    hidden_layer_sizes = [16, 8]        # the interactive layer's width, then the top's hidden widths
    bottom_sizes = [8]                  # every data party's bottom layers; or a table: {telco = [8], bank = []}
                                        # (a party the table leaves out gets none: its columns go straight in)
    activation = "relu"                 # "identity", "logistic", "tanh"
    solver = "adam"                     # or "sgd" (momentum, nesterovs_momentum)
    iterations = 30                     # epochs at most (max_iter)
    batch_size = 256                    # or "auto": min(200, rows)
    learning_rate_init = 0.01
    alpha = 0.0001
    tol = 1e-4                          # with n_iter_no_change, early_stopping, validation_fraction
    random_state = 0                    # the public schedule's seed (batches, validation rows), never a weight
    frac_bits = 40                      # the shared backward pass's fixed point

The credit-scoring pipeline (docs/credit_scoring.md): a ``[pipeline]`` table
beside logistic regression's ``[training]`` makes ``vfl party`` run PSI,
binning, WOE/IV, selection, the model and the scorecard in one command (the
coordinator takes part in the model only); every key is optional::

    [pipeline]
    max_bins = 10
    strategy = "quantile"               # or "uniform": every party's columns
    label_strategy = "monotone"         # the label party's own columns (or "quantile", "uniform")
    share_woe = false                   # true: each feature party gets its bins' WOE values (their event rates)
    iv_threshold = 0.02                 # selection; also top_k_per_party, top_k, max_correlation, max_vif
    base_score = 600                    # the scorecard's anchors: base_score points at base_odds:1,
    base_odds = 50                      # pdo points to double the odds
    pdo = 20

    [data]
    id_column = "id"
    align = "psi"                       # rows aligned by private set intersection; "same-ids": each CSV
                                        # must hold the same ids (checked by a salted digest)
    psi_backend = "vfl"                 # vfl's own PSI; "secretflow-rr22": SecretFlow's engine (RR22, pairwise
                                        # hub-spoke; pip install vfl[secretflow]; docs/psi.md)
    psi_port_offset = 1000              # secretflow-rr22: each party's engine listens on its port + this
                                        # (the label party on K consecutive ports from there, one per spoke)
    psi_protocol = "dh"                 # vfl's own PSI: "dh" (Diffie-Hellman on Curve25519), "kkrt" (KKRT's
                                        # OPRF on OT extension: far less CPU, more bytes) or "unbalanced" (the
                                        # larger party's OPRF outputs computed once and cached; docs/psi.md)
    label = "label"                     # the label party's label column
    sample_weight = "w"                 # optional: a column of the label party's CSV weighing each row's loss

    [network]                           # local: may differ between machines
    connect_timeout = 120               # seconds to reach every peer, retries included
    timeout = 300                       # seconds to wait for any one message
    handshake_timeout = 5               # seconds an incoming connection has to finish TLS and its hello
    max_frame_bytes = 67108864

    [compute]                           # local: where this party runs its encrypted work
    backend = "local"                   # vfl's worker processes; "dask": scheduler = "tcp://host:8786"
                                        # ([compute.NAME] for one party; see vfl.deploy.compute)

    [serving.bank]                      # local: vfl serve's settings ([serving] for every party; see
    http = "127.0.0.1:8080"             # vfl.deploy.serving_settings): the label party's HTTP API, and
    store = "sqlite:///bank.db"         # each data party's store of rows by id

Party names are DNS labels (letters, digits, ``-``; they are also the names in
the certificates), distinct even ignoring case.  A file naming exactly the
parties A, B and C may leave out every ``role``: A is then the feature party, B
the label party and C the coordinator (Yang et al.'s three parties).  The
feature parties take part in the order of their names (sorted), whatever the
order of the tables in the file.

The *shared* part (``[training]``, ``[prediction]`` and every party's name and
role) is hashed into a fingerprint that parties compare when they connect;
``[network]``, ``[compute]`` and ``[serving]`` are local to each machine, and so is what a party trusts
(the CAs, pinned fingerprints and revocation lists: each party's TLS layer checks every peer against
what is pinned for the peer's name; ``[federation] ca`` may be left out when every party names its own).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the same parser, from PyPI
    import tomli as tomllib

from vfl.errors import ConfigurationError
from vfl.families import FAMILIES, Family, family_of_table
from vfl.deploy.compute import ComputeSettings, parse_compute
from vfl.protocols import Roster
from vfl.protocols.credit.settings import CreditSettings, check_scorecard_model
from vfl.protocols.values import check_keys
from vfl.deploy.serving_settings import ServingSettings, parse_serving
from vfl.protocols import psi_secretflow
from vfl.transport.network import NetworkSettings, parse_address
from vfl.transport.tls import ROLE_PATTERN, PeerPin, TLSFiles, parse_fingerprint

#: What a party can be: a feature party (columns), the label party (columns and labels), the coordinator (keys).
KINDS = ("feature", "label", "coordinator")
#: Yang et al.'s three parties: a file naming exactly these may leave out the ``role`` keys.
LEGACY_ROLES = {"A": "feature", "B": "label", "C": "coordinator"}
_SECTIONS = {"federation", "parties", "training", "prediction", "data", "network", "compute", "pipeline", "serving"}
#: How the parties' rows are matched (``[data] align``).
ALIGNMENTS = ("psi", "same-ids")
#: Who computes the private set intersection (``[data] psi_backend``): vfl's own protocol, or SecretFlow's engine.
PSI_BACKENDS = ("vfl", psi_secretflow.BACKEND)
#: ``[data] psi_port_offset``: the SecretFlow engine's port is a party's own port plus this.
#: Which of vfl's own PSI protocols runs (``[data] psi_protocol``): Diffie–Hellman, KKRT's OPRF, or the unbalanced PSI.
PSI_PROTOCOLS = ("dh", "kkrt", "unbalanced")
PSI_PORT_OFFSET = 1000


#: A feature party's differential-privacy keys for its releases, with their defaults.
RELEASE_KEYS = {"release_epsilon": None, "release_delta": 1e-6, "release_clip": 4.0, "release_budget": 10.0}


def _release_dp(here: str, entry: dict, role: str) -> dict | None:
    """A feature party's ``release_epsilon`` (and its companions), checked; None without it."""
    given = {k: entry[k] for k in RELEASE_KEYS if k in entry}
    if not given:
        return None
    if role != "feature":
        raise ConfigurationError(f"{here}: {', '.join(given)} apply to a feature party's releases, not a {role} party")
    if "release_epsilon" not in given:
        raise ConfigurationError(f"{here}: {', '.join(given)} given without release_epsilon")
    values = {k[len("release_"):]: given.get(k, default) for k, default in RELEASE_KEYS.items()}
    for key, value in values.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or \
                (key == "delta" and not value < 1):
            raise ConfigurationError(f"{here}: release_{key} must be a number above 0"
                                     f"{' and below 1' if key == 'delta' else ''}, got {value!r}")
    return {k: float(v) for k, v in values.items()}


@dataclass(frozen=True)
class Explanations:
    """``[prediction] explain`` and ``reasons``: after its scores, ``vfl predict`` explains them
    (docs/explanations.md); the label party writes ``explanations.csv``."""

    #: how many reasons per row the label party names (0: the contributions only)
    reasons: int = 0
    #: the adverse class (a classifier; default its second class) or ``"high"``/``"low"`` (a regressor)
    adverse: str | int | float | None = None


def _explanations(where: str, table: dict, family: Family) -> Explanations | None:
    """``[prediction] explain``, ``reasons`` and ``adverse``, checked; None when no explanation is asked."""
    explain, reasons = table.get("explain", False), table.get("reasons", 0)
    if not isinstance(explain, bool):
        raise ConfigurationError(f"{where}: explain must be true or false, got {explain!r}")
    if isinstance(reasons, bool) or not isinstance(reasons, int) or not 0 <= reasons <= 20:
        raise ConfigurationError(f"{where}: reasons must be a whole number of reasons per row from 0 to 20 "
                                 f"(adverse-action notices name up to 4), got {reasons!r}")
    adverse = table.get("adverse")
    if adverse is not None and (isinstance(adverse, bool) or not isinstance(adverse, (str, int, float))):
        raise ConfigurationError(f"{where}: adverse must be a class of the label (or 'high'/'low' for a regressor), "
                                 f"got {adverse!r}")
    if not (explain or reasons):
        if adverse is not None:
            raise ConfigurationError(f"{where}: adverse says which side reasons point to: give reasons = K with it")
        return None
    if not family.explains:
        raise ConfigurationError(f"{where}: vfl predict explains linear models, the credit pipeline and gradient "
                                 "boosting; "
                                 f"{family.title} is explained by its estimator's explain() and predict_reasons() "
                                 "(docs/explanations.md): leave explain and reasons out")
    return Explanations(reasons, adverse)


def _reason_columns(here: str, entry: dict, role: str) -> dict | None:
    """A feature party's ``reason_columns``: a list of its columns, or a table of column = code; ``{column: code}``.
    Its columns are checked against its data when it explains (it alone knows them)."""
    if "reason_columns" not in entry:
        return None
    given = entry["reason_columns"]
    if role != "feature":
        raise ConfigurationError(f"{here}: reason_columns is a feature party's consent to be named in reasons; "
                                 f"this party is the {role} party (leave it out)")
    codes = dict(given) if isinstance(given, dict) else {c: c for c in given} if isinstance(given, list) else None
    if codes is None or not all(isinstance(c, str) and c and isinstance(v, str) and v for c, v in codes.items()):
        raise ConfigurationError(f"{here}: reason_columns must be a list of the party's column names, or a table of "
                                 f"column = \"the code it publishes\", each a non-empty string; got {given!r}")
    return codes


@dataclass(frozen=True)
class PartyEntry:
    """One party's entry: its name, role (one of :data:`KINDS`), address and TLS files."""

    name: str
    role: str
    address: tuple[str, int]
    certificate: Path
    key: Path
    #: this party (a feature party) releases per-row outputs even where its release check finds that the label
    #: party could rebuild its columns (its ``allow_reconstruction = true``, or the older ``allow_score_span``:
    #: read by this party only, see :mod:`vfl.protocols.release`)
    allow_reconstruction: bool = False
    #: differential privacy on its releases: ``{"epsilon", "delta", "clip", "budget"}``, or None
    #: (:mod:`vfl.protocols.release_dp`; read by this party only)
    release_dp: dict | None = None
    #: the CA that signs this party's certificates (its organisation's own), or None: the federation's ``ca``
    ca: Path | None = None
    #: the SHA-256 fingerprint of the one certificate this party may present (``"sha256:..."``), or None
    fingerprint: str | None = None
    #: the revocation list of this party's own CA, or None
    crl: Path | None = None
    #: the columns this party (a feature party) lets an explanation name as a row's reason, with the code it
    #: publishes for each (``{column: code}``), or None: it appears as "information from <party>" (read by this
    #: party only; docs/explanations.md)
    reason_columns: dict | None = None

    @property
    def allow_score_span(self) -> bool:          # the opt-in's earlier name
        return self.allow_reconstruction


@dataclass(frozen=True)
class FederationConfig:
    """A parsed ``federation.toml``."""

    path: Path
    #: the federation CA, or None if every party names its own CA (``ca`` in its table)
    ca: Path | None
    parties: dict[str, PartyEntry]
    #: the family's settings (its settings dataclass, :attr:`vfl.families.Family.settings`), from ``[training]``
    training: object
    #: the model family it trains or scores (:mod:`vfl.families`): the one place that says what differs
    family: Family = FAMILIES["linear"]
    prediction_mode: str = "private"
    id_column: str = "id"
    #: how the parties' rows are matched: "psi" (private set intersection) or "same-ids"
    align: str = "psi"
    #: who computes the intersection: "vfl" (vfl's own PSI) or "secretflow-rr22" (SecretFlow's engine, pairwise)
    psi_backend: str = "vfl"
    #: secretflow-rr22: each party's engine listens on its own port plus this
    psi_port_offset: int = PSI_PORT_OFFSET
    #: vfl's own PSI: "dh" (Diffie–Hellman, vfl.protocols.psi), "kkrt" (vfl.protocols.psi_kkrt) or "unbalanced"
    #: (vfl.protocols.psi_unbalanced)
    psi_protocol: str = "dh"
    label: str = "label"
    #: the label party's column of row weights (``[data] sample_weight``), or None
    sample_weight: str | None = None
    #: ``[training] warm_start``: every data party continues from the model shard in its work folder
    warm_start: bool = False
    #: ``[training] report_metrics``: after training, the label party's metrics by one more private prediction
    report_metrics: bool = True
    network: NetworkSettings = field(default_factory=NetworkSettings)
    timeout: float = 300.0
    #: each party's ``[compute]`` settings (local: not part of the fingerprint)
    compute: dict[str, ComputeSettings] = field(default_factory=dict)
    #: ``[pipeline]``: the credit-scoring steps around the logistic model, or None
    pipeline: CreditSettings | None = None
    #: each party's ``[serving]`` settings (local: not part of the fingerprint; see :mod:`vfl.deploy.serving_settings`)
    serving: dict[str, ServingSettings] = field(default_factory=dict)
    #: ``[federation] crl``: the federation CA's revocation lists (local: not part of the fingerprint)
    crls: tuple[Path, ...] = ()
    #: ``[prediction] explain`` / ``reasons``: ``vfl predict`` explains every score, or None
    explanations: Explanations | None = None

    @property
    def roster(self) -> Roster:
        """Who plays which role; the feature parties in the order of their names (trees: no coordinator)."""
        by_role = {kind: sorted(n for n, e in self.parties.items() if e.role == kind) for kind in KINDS}
        coordinator = None if not self.family.coordinator or not by_role["coordinator"] else by_role["coordinator"][0]
        return Roster(tuple(by_role["feature"]), by_role["label"][0], coordinator)

    def tls(self, name: str) -> TLSFiles:
        """Party ``name``'s TLS files, with what it pins for each party (its own CA, its fingerprint) and the CRLs."""
        entry = self.party(name)
        pins = {other: PeerPin(e.ca, e.fingerprint) for other, e in self.parties.items()
                if e.ca is not None or e.fingerprint is not None}
        crls = (*self.crls, *(e.crl for e in self.parties.values() if e.crl is not None))
        return TLSFiles(self.ca if self.ca is not None else entry.ca, entry.certificate, entry.key, pins,
                        tuple(dict.fromkeys(crls)))

    def party(self, name: str) -> PartyEntry:
        """Party ``name``'s entry; a :class:`ConfigurationError` naming the file if there is none."""
        try:
            return self.parties[name]
        except KeyError:
            raise ConfigurationError(f"{self.path}: no party {name!r}; the file names {sorted(self.parties)}") \
                from None

    def serving_of(self, name: str) -> ServingSettings:
        """Party ``name``'s ``[serving]`` settings (the defaults, with ``models`` beside the file, if none)."""
        self.party(name)
        return self.serving.get(name) or ServingSettings(models=self.path.resolve().parent / "models")

    def role_of(self, name: str) -> str:
        """``"feature"``, ``"label"`` or ``"coordinator"``."""
        return self.party(name).role

    def addresses(self) -> dict[str, tuple[str, int]]:
        return {name: entry.address for name, entry in self.parties.items()}

    def engine_addresses(self) -> dict[str, tuple[str, int]]:
        """Where SecretFlow's PSI engine of each data party listens: its host, its port + ``psi_port_offset``.

        The label party listens on that port and the next ones, one per feature party (in roster order).
        """
        roster = self.roster
        return {name: (self.parties[name].address[0], self.parties[name].address[1] + self.psi_port_offset)
                for name in (roster.label, *roster.features)}

    def shared(self, task: str) -> dict:
        """What every party must agree on for ``task`` ("train" or "predict"): settings, names and roles."""
        shared = {"task": task, "roles": {name: entry.role for name, entry in sorted(self.parties.items())},
                  "training": self.training.to_dict(), "prediction_mode": self.prediction_mode, "align": self.align}
        if self.family.model is not None:           # the linear family's model word is its objective
            shared["model"] = self.family.model
        if self.warm_start:
            shared["warm_start"] = True
        if not self.report_metrics:
            shared["report_metrics"] = False
        if self.pipeline is not None:
            shared["pipeline"] = self.pipeline.to_dict()
        if self.psi_backend != "vfl":
            shared["psi_backend"] = [self.psi_backend, self.psi_port_offset]
        if self.psi_protocol != "dh":
            shared["psi_protocol"] = self.psi_protocol
        if self.explanations is not None and task == "predict":
            shared["explanations"] = [self.explanations.reasons, self.explanations.adverse]
        return shared

    def fingerprint(self, task: str) -> str:
        """SHA-256 of the canonical JSON of :meth:`shared`."""
        canonical = json.dumps(self.shared(task), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def load_config(path) -> FederationConfig:
    """Read and check ``federation.toml``; raise :class:`ConfigurationError` naming what is wrong."""
    path = Path(path)
    try:
        with path.open("rb") as f:
            raw = tomllib.load(f)
    except OSError as exc:
        raise ConfigurationError(f"cannot read the federation file {path}: {exc.strerror or exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigurationError(f"{path}: not valid TOML: {exc}") from None
    where = str(path)
    _unknown(where, raw, _SECTIONS)
    base = path.resolve().parent
    federation = _section(where, raw, "federation")
    _unknown(f"{where} [federation]", federation, {"ca", "crl"})
    ca = _file(f"{where} [federation]", base, federation, "ca")
    crl = federation.get("crl", [])         # one revocation list, or an array of them
    crls = tuple(_file(f"{where} [federation]", base, {"crl": c}, "crl") for c in (crl if isinstance(crl, list)
                                                                                   else [crl]))

    training_table = dict(_section(where, raw, "training", required=False))   # none: the defaults
    family = family_of_table(training_table.get("model"), "pipeline" in raw, where)
    parties = _parties(where, base, _section(where, raw, "parties"), family.coordinator)
    unsigned = sorted(name for name, entry in parties.items() if entry.ca is None)
    if ca is None and unsigned:
        raise ConfigurationError(f"{where}: no CA for {', '.join(f'[parties.{n}]' for n in unsigned)}: give "
                                 "[federation] ca (the federation's CA), or ca in the table of every party (each "
                                 "organisation's own CA)")
    warm_start = training_table.pop("warm_start", False)
    report_metrics = training_table.pop("report_metrics", True)
    for name, value in (("warm_start", warm_start), ("report_metrics", report_metrics)):
        if not isinstance(value, bool):
            raise ConfigurationError(f"{where} [training]: {name} must be true or false, got {value!r}")
    if warm_start and not family.warm_start and family.table is None:   # else said by its own table's reader
        raise ConfigurationError(f"{where} [training]: warm_start continues a linear model's weights; "
                                 f"{family.title} trains afresh (leave warm_start out)")
    training = family.read_training(f"{where} [training]", training_table,
                                    {name: entry.role for name, entry in parties.items()},
                                    {"report_metrics", *(["warm_start"] if family.warm_start else [])})
    if warm_start and getattr(training, "reveal", None) == "never":
        raise ConfigurationError(f"{where} [training]: warm_start continues from each party's weights, and with "
                                 "reveal = \"never\" no party holds its weights: leave one of them out")
    prediction = _section(where, raw, "prediction", required=False)
    _unknown(f"{where} [prediction]", prediction, {"mode", "explain", "reasons", "adverse"})
    explanations = _explanations(f"{where} [prediction]", prediction, family)
    mode = prediction.get("mode", "private")
    if mode not in ("private", "table3"):
        raise ConfigurationError(f"{where} [prediction]: mode must be 'private' or 'table3', got {mode!r}")
    if not family.table3 and mode != "private":
        raise ConfigurationError(f"{where} [prediction]: mode {mode!r} is Yang et al.'s Table 3 for linear models; "
                                 f"{family.title} predicts privately only (leave mode out)")
    data = _section(where, raw, "data", required=False)
    _unknown(f"{where} [data]", data, {"id_column", "label", "align", "sample_weight", "psi_backend",
                                       "psi_port_offset", "psi_protocol"})
    align = data.get("align", "psi")
    if align not in ALIGNMENTS:
        raise ConfigurationError(f"{where} [data]: align must be one of {list(ALIGNMENTS)}, got {align!r}")
    psi_backend, psi_port_offset = _psi_backend(f"{where} [data]", data, align, parties)
    psi_protocol = _psi_protocol(f"{where} [data]", data, align, psi_backend)
    pinning = sorted(n for n, e in parties.items() if e.ca is not None or e.fingerprint is not None or e.crl)
    if psi_backend != "vfl" and (pinning or crls):
        raise ConfigurationError(f"{where} [data]: psi_backend = {psi_backend!r}: SecretFlow's engine trusts one CA, "
                                 "[federation] ca, and checks no pinned CA, fingerprint or revocation list "
                                 f"({', '.join(f'[parties.{n}]' for n in pinning) or '[federation] crl'}): leave "
                                 "psi_backend out, or those keys")
    if data.get("id_column", "id") == data.get("label", "label"):
        raise ConfigurationError(f"{where} [data]: label and id_column are both {data.get('label', 'label')!r}; "
                                 "the label must be another column than the row ids")
    weight = data.get("sample_weight")
    if weight is not None:
        if not isinstance(weight, str) or not weight:
            raise ConfigurationError(f"{where} [data]: sample_weight must be the name of a column of the label "
                                     f"party's CSV, got {weight!r}")
        if weight in (data.get("id_column", "id"), data.get("label", "label")):
            raise ConfigurationError(f"{where} [data]: sample_weight {weight!r} is also the id or label column")
        if not family.row_weights and family.table is None:             # else said by its own table's reader
            raise ConfigurationError(f"{where} [data]: sample_weight weighs the linear models' loss; "
                                     f"{family.title} does not take row weights (leave sample_weight out)")
        try:
            training = replace(training, sample_weighted=True)      # every party sizes its bounds for it
        except ConfigurationError as exc:
            raise ConfigurationError(f"{where} [data] sample_weight: {exc}") from None
    network = _section(where, raw, "network", required=False)
    _unknown(f"{where} [network]", network, {"connect_timeout", "timeout", "handshake_timeout", "max_frame_bytes"})
    timeout = _number(f"{where} [network]", network, "timeout", 300.0)
    try:
        net = NetworkSettings(connect_timeout=_number(f"{where} [network]", network, "connect_timeout", 120.0),
                              handshake_timeout=_number(f"{where} [network]", network, "handshake_timeout",
                                                        NetworkSettings.handshake_timeout),
                              send_timeout=timeout,
                              max_frame_bytes=int(network.get("max_frame_bytes", NetworkSettings.max_frame_bytes)))
    except (TypeError, ValueError) as exc:
        raise ConfigurationError(f"{where} [network]: {exc}") from None
    compute = parse_compute(where, _section(where, raw, "compute", required=False),
                            {name: entry.role for name, entry in parties.items()})
    pipeline = None
    if "pipeline" in raw:
        pipeline = _pipeline(f"{where} [pipeline]", _section(where, raw, "pipeline"), training, weight)
        if warm_start:
            raise ConfigurationError(f"{where} [training]: warm_start continues a model's weights; the pipeline "
                                     "bins, selects and trains afresh (leave warm_start out)")
    serving = parse_serving(where, _section(where, raw, "serving", required=False), list(parties), base)
    return FederationConfig(path=path, ca=ca, parties=parties, training=training, family=family, prediction_mode=mode,
                            id_column=str(data.get("id_column", "id")), label=str(data.get("label", "label")),
                            align=align, psi_backend=psi_backend, psi_port_offset=psi_port_offset,
                            psi_protocol=psi_protocol,
                            sample_weight=weight, warm_start=warm_start, report_metrics=report_metrics,
                            network=net, timeout=timeout, compute=compute, pipeline=pipeline, serving=serving,
                            explanations=explanations,
                            crls=crls)


def _psi_backend(where: str, table: dict, align: str, parties: dict) -> tuple[str, int]:
    """``[data] psi_backend`` and ``psi_port_offset``: who computes the intersection, and the engine's ports.

    SecretFlow's engine is checked here, before any connection: its package must be installed, and its
    ports (each data party's port + the offset; the label party's next ones, one per feature party) must
    be valid and clash with no party's port on the same host.
    """
    backend = table.get("psi_backend", "vfl")
    if backend not in PSI_BACKENDS:
        raise ConfigurationError(f"{where}: psi_backend must be one of {list(PSI_BACKENDS)}, got {backend!r}")
    offset = table.get("psi_port_offset", PSI_PORT_OFFSET)
    if isinstance(offset, bool) or not isinstance(offset, int) or not -65535 < offset < 65536 or offset == 0:
        raise ConfigurationError(f"{where}: psi_port_offset must be a non-zero whole number of ports, got {offset!r}")
    if backend == "vfl":
        if "psi_port_offset" in table:
            raise ConfigurationError(f"{where}: psi_port_offset sets SecretFlow's engine's ports: it needs "
                                     f"psi_backend = {psi_secretflow.BACKEND!r} (leave it out)")
        return backend, offset
    if align != "psi":
        raise ConfigurationError(f"{where}: psi_backend = {backend!r} computes a private set intersection; "
                                 f"align = {align!r} does not run one (set align = \"psi\" or leave psi_backend out)")
    psi_secretflow.require_spu(where)
    taken = {entry.address: f"party {name}'s own port" for name, entry in parties.items()}
    label = next(n for n, e in parties.items() if e.role == "label")
    features = sorted(n for n, e in parties.items() if e.role == "feature")
    wanted = [(label, parties[label].address[1] + offset + j) for j in range(len(features))]
    wanted += [(name, parties[name].address[1] + offset) for name in features]
    for name, port in wanted:
        host = parties[name].address[0]
        if not 0 < port < 65536:
            raise ConfigurationError(f"{where}: party {name}'s PSI engine port would be {port} (its port + "
                                     f"psi_port_offset {offset}), not a valid port: choose another psi_port_offset")
        clash = taken.get((host, port))
        if clash:
            raise ConfigurationError(f"{where}: party {name}'s PSI engine port {host}:{port} (its port + "
                                     f"psi_port_offset {offset}) is {clash}: choose another psi_port_offset")
        taken[(host, port)] = f"party {name}'s PSI engine port"
    return backend, offset


def _psi_protocol(where: str, table: dict, align: str, backend: str) -> str:
    """``[data] psi_protocol``: which of vfl's own PSI protocols runs ("dh" unless given)."""
    protocol = table.get("psi_protocol", "dh")
    if protocol not in PSI_PROTOCOLS:
        raise ConfigurationError(f"{where}: psi_protocol must be one of {list(PSI_PROTOCOLS)}, got {protocol!r}")
    if "psi_protocol" in table and backend != "vfl":
        raise ConfigurationError(f"{where}: psi_protocol chooses vfl's own PSI protocol; psi_backend = {backend!r} "
                                 "runs SecretFlow's engine instead (leave one of them out)")
    if "psi_protocol" in table and align != "psi":
        raise ConfigurationError(f"{where}: psi_protocol = {protocol!r} computes a private set intersection; "
                                 f"align = {align!r} does not run one (set align = \"psi\" or leave psi_protocol out)")
    return protocol


def _pipeline(where: str, table: dict, training, weight) -> CreditSettings:
    """``[pipeline]``: the credit-scoring steps, around logistic regression (one event class)."""
    if training.objective != "logistic":      # (a tree or network model with [pipeline] is refused as chosen)
        raise ConfigurationError(f"{where}: the pipeline's model is logistic regression on the coded bins: set "
                                 "[training] model = \"logistic\"")
    if weight is not None:
        raise ConfigurationError(f"{where}: the pipeline does not take row weights (leave [data] sample_weight out)")
    check_scorecard_model(training.protocol, training.reveal, where)
    _unknown(where, table, CreditSettings.keys())
    try:
        return CreditSettings.from_table(dict(table))
    except ConfigurationError as exc:
        raise ConfigurationError(f"{where}: {exc}") from None


def _parties(where: str, base: Path, table: dict, coordinator: bool = True) -> dict[str, PartyEntry]:
    """The ``[parties.NAME]`` tables: valid names, one role each, one label party and one coordinator.

    Without a ``coordinator`` in the family's runs (trees) the coordinator may be left out.
    """
    legacy = set(table) == set(LEGACY_ROLES) and not any(isinstance(e, dict) and "role" in e for e in table.values())
    parties, lowered = {}, {}
    for name, entry in table.items():
        here = f"{where} [parties.{name}]"
        if not isinstance(name, str) or not ROLE_PATTERN.match(name):
            raise ConfigurationError(f"{where}: {name!r} is not a valid party name: use letters, digits and '-' "
                                     "(a DNS label: the name is also in the party's certificate)")
        if name.lower() in lowered:
            raise ConfigurationError(f"{where}: parties {lowered[name.lower()]!r} and {name!r} differ only in case; "
                                     "give them distinct names")
        lowered[name.lower()] = name
        if not isinstance(entry, dict):
            raise ConfigurationError(f"{here}: expected a table")
        _unknown(here, entry, {"role", "address", "certificate", "key", "allow_score_span", "allow_reconstruction",
                               *RELEASE_KEYS, "ca", "fingerprint", "crl", "reason_columns"})
        if legacy:
            role = LEGACY_ROLES[name]
        elif "role" not in entry:
            raise ConfigurationError(f"{here}: 'role' is missing: give every party a role, one of {list(KINDS)} "
                                     "(only a file naming exactly the parties A, B and C may leave out the roles)")
        else:
            role = entry["role"]
        if role not in KINDS:
            raise ConfigurationError(f"{here}: role must be one of {list(KINDS)}, got {role!r}")
        if "allow_score_span" in entry and "allow_reconstruction" in entry:
            raise ConfigurationError(f"{here}: give allow_reconstruction only (allow_score_span is its earlier name)")
        key = "allow_score_span" if "allow_score_span" in entry else "allow_reconstruction"
        span = entry.get(key, False)
        if not isinstance(span, bool) or (span and role != "feature"):
            raise ConfigurationError(f"{here}: {key} must be true or false, for a feature party, "
                                     f"got {span!r}" + (f" for a {role} party" if span is True else ""))
        try:
            pinned = parse_fingerprint(entry["fingerprint"]) if "fingerprint" in entry else None
        except ConfigurationError as exc:
            raise ConfigurationError(f"{here}: {exc}") from None
        parties[name] = PartyEntry(name, role, parse_address(_required(here, entry, "address")),
                                   _path(base, _required(here, entry, "certificate")),
                                   _path(base, _required(here, entry, "key")), span,
                                   _release_dp(here, entry, role), ca=_file(here, base, entry, "ca"),
                                   fingerprint=pinned, crl=_file(here, base, entry, "crl"),
                                   reason_columns=_reason_columns(here, entry, role))
    for kind, what in (("label", "the party holding the labels"), ("coordinator", "the key holder")):
        named = [n for n, e in parties.items() if e.role == kind]
        if len(named) != 1 and not (kind == "coordinator" and not coordinator and not named):
            raise ConfigurationError(f"{where}: exactly one party must have role = {kind!r} ({what}); "
                                     f"{'parties ' + ', '.join(named) + ' have it' if named else 'none has'}")
    if not any(e.role == "feature" for e in parties.values()):
        raise ConfigurationError(f"{where}: no party has role = 'feature'; a federation needs at least one "
                                 "feature party besides the label party")
    addresses = [p.address for p in parties.values()]
    if len(set(addresses)) != len(addresses):
        raise ConfigurationError(f"{where}: two parties share an address: {addresses}")
    return parties


def _section(where: str, raw: dict, name: str, required: bool = True) -> dict:
    if name not in raw:
        if required:
            raise ConfigurationError(f"{where}: the [{name}] section is missing")
        return {}
    if not isinstance(raw[name], dict):
        raise ConfigurationError(f"{where}: [{name}] must be a table")
    return raw[name]


#: The keys of a table not in ``allowed``, refused naming the table.
_unknown = check_keys


def _required(where: str, table: dict, key: str):
    if key not in table:
        raise ConfigurationError(f"{where}: {key!r} is missing")
    return table[key]


def _path(base: Path, value) -> Path:
    if not isinstance(value, str):
        raise ConfigurationError(f"expected a file path, got {value!r}")
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _file(where: str, base: Path, table: dict, key: str) -> Path | None:
    """``table[key]``, a file path relative to ``base``; None if the key is absent."""
    if key not in table:
        return None
    if not isinstance(table[key], str) or not table[key]:
        raise ConfigurationError(f"{where}: {key} must be a file path, got {table[key]!r}")
    return _path(base, table[key])


def _number(where: str, table: dict, key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigurationError(f"{where}: {key} must be a positive number of seconds, got {value!r}")
    return float(value)


def write_config(path, ca, parties: dict, training: dict, network: dict | None = None,
                 prediction_mode: str = "private", id_column: str = "id", label: str = "label",
                 align: str = "psi", sample_weight: str | None = None, pipeline: dict | None = None,
                 serving: dict | None = None, psi_backend: str | None = None,
                 psi_port_offset: int | None = None, crl=None, psi_protocol: str | None = None,
                 prediction: dict | None = None) -> Path:
    """Write a ``federation.toml`` (used by ``vfl demo`` and the tests).

    ``parties`` maps a party's name to ``{"address": "host:port", "certificate": path, "key": path}``,
    and optionally ``"role"`` (``"feature"``, ``"label"`` or ``"coordinator"``), ``"allow_reconstruction"`` (a bool)
    and ``"release_epsilon"`` (with its companions, :data:`RELEASE_KEYS`).
    ``serving`` holds ``[serving]`` keys, and a party's own ``[serving.NAME]`` table under its name.
    A party's table may also pin its own ``"ca"`` and its ``"fingerprint"``, and name its CA's ``"crl"``;
    ``ca`` may then be None (every party names its own), and ``crl`` is ``[federation] crl`` (a path or a list).
    ``prediction`` holds further ``[prediction]`` keys (``explain``, ``reasons``, ``adverse``).
    """
    lines = ["[federation]"] + ([f"ca = {_toml(str(ca))}"] if ca is not None else []) + \
        ([f"crl = {_toml(crl)}"] if crl is not None else []) + [""]
    for name in sorted(parties):
        lines.append(f"[parties.{name}]")
        lines += [f"{k} = {_toml(v if isinstance(v, (bool, int, float, list, dict)) else str(v))}"
                  for k, v in parties[name].items()]
        lines.append("")
    for title, table in (("training", training), ("prediction", {"mode": prediction_mode, **(prediction or {})}),
                         ("data", {"id_column": id_column, "label": label, "align": align, "sample_weight": sample_weight,
                                   "psi_backend": psi_backend, "psi_port_offset": psi_port_offset,
                                   "psi_protocol": psi_protocol}),
                         ("network", network or {})) + ((("pipeline", pipeline),) if pipeline is not None else ()):
        lines.append(f"[{title}]")
        lines += [f"{k} = {_toml(v)}" for k, v in table.items() if v is not None]
        lines.append("")
    serving = serving or {}
    for title, table in [("serving", {k: v for k, v in serving.items() if not isinstance(v, dict)}),
                         *((f"serving.{k}", v) for k, v in serving.items() if isinstance(v, dict))]:
        if table:
            lines.append(f"[{title}]")
            lines += [f"{k} = {_toml(v)}" for k, v in table.items() if v is not None]
            lines.append("")
    path = Path(path)
    path.write_text("\n".join(lines))
    return path


def _toml(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, dict):                  # an inline table (e.g. a split network's bottom_sizes by party)
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml(v)}" for k, v in value.items()) + "}"
    return json.dumps(str(value))  # a JSON string is a valid TOML basic string
