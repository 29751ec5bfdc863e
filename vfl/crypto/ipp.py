"""Finding and loading Intel's multi-buffer library ``libcrypto_mb.so`` (the ``vfl[fast-crypto]`` extra), once.

``pip install "vfl[fast-crypto]"`` brings Intel's ``ipp-crypto`` wheel (Apache-2.0), whose
``libcrypto_mb.so`` computes eight X25519 ladders or eight modular exponentiations at once in the
eight 64-bit lanes of AVX-512 registers with the IFMA multiply-add (52-bit limbs).  The library
needs the runtime libraries of Intel's compiler (``libimf``, ``libsvml``, ``libirng``,
``libintlc``), which the ``intel-cmplr-lib-rt`` wheel ships under Intel's own (proprietary,
redistributable) licence: that is why the extra is optional, chosen by the user, and never a
requirement of vfl.

This module only finds the library, checks that this machine can run it and loads it:
:func:`open_library` returns the loaded library or raises :class:`Unavailable` saying why not.
What runs on it, and the known-answer test each use passes before it runs, are the users':
:mod:`vfl.crypto.mb` (X25519) and :mod:`vfl.crypto.mbexp` (modular exponentiation).
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
import threading
from pathlib import Path

#: The extra that brings the library.
EXTRA = "vfl[fast-crypto]"
#: Lanes of one call of a multi-buffer function.
LANES = 8
_RUNTIME = ("libintlc.so.5", "libimf.so", "libsvml.so", "libirng.so")   # what libcrypto_mb.so links to

_lock = threading.Lock()
_loaded: dict[str, ctypes.CDLL] = {}


def engine_choice(env: str, fallback: str) -> tuple[str, dict | None]:
    """The engine environment variable ``env`` asks for: ``auto`` (unset), ``ipp`` or ``fallback``, and the state of
    the fallback engine (with the reason) when it is not to be tried, else None."""
    choice = os.environ.get(env, "auto").strip().lower() or "auto"
    if choice not in ("auto", "ipp", fallback):
        return choice, {"engine": fallback, "fast": False,
                        "reason": f"{env}={choice!r} is not one of auto, ipp, {fallback}: using {fallback}"}
    if choice == fallback:
        return choice, {"engine": fallback, "fast": False, "reason": f"{env}={fallback} asks for {fallback}"}
    return choice, None


class EngineState:
    """An engine's state as its module reports it: ``load()``'s answer, computed once per process and again when the
    environment variable ``env`` (the engine asked for) changes; thread-safe.  Calling it gives the state.

    Parameters
    ----------
    env : str
        The engine's environment variable (``VFL_CURVE_ENGINE``, ``VFL_MODEXP_ENGINE``).
    load : callable
        Finds, loads and checks the engine (:func:`load_engine`); returns its state (a dict).
    """

    def __init__(self, env: str, load):
        self._env, self._load = env, load
        self._lock = threading.Lock()
        self._state: dict | None = None

    def __call__(self) -> dict:
        state = self._state
        if state is None or state.get("_env") != os.environ.get(self._env):
            with self._lock:
                if self._state is None or self._state.get("_env") != os.environ.get(self._env):
                    state = self._load()
                    state["_env"] = os.environ.get(self._env)
                    self._state = state
                state = self._state
        return state


class Unavailable(Exception):
    """The library cannot run here; the message says why (for the engines' reports)."""


def load_engine(env: str, fast: str, fallback: str, bind, self_test, against: str, unavailable,
                locate=None, cpu_has_ifma=None, tested: str = "libcrypto_mb.so") -> dict:
    """One engine of the library found, loaded and checked (once per process, by the engine's module), or the
    fallback engine's state with the reason: what the engines report.

    ``bind(lib)`` gives the engine's functions as state entries (an ``AttributeError`` for one the library
    lacks); ``self_test(state)`` its known-answer test against ``against``, a failure's description or "".  With
    ``env=ipp`` an engine that cannot run raises ``unavailable`` instead of falling back; ``tested`` names what
    failed the test in the reason.  ``locate`` and
    ``cpu_has_ifma`` as for :func:`open_library` (the engines' modules pass theirs, which tests stand in for).
    """
    choice, state = engine_choice(env, fallback)
    if state is not None:
        return state

    def off(reason: str) -> dict:
        if choice == "ipp":
            raise unavailable(f"{env}=ipp: {reason}")
        return {"engine": fallback, "fast": False, "reason": reason}

    try:
        lib, path = open_library(**{k: v for k, v in (("locate", locate), ("cpu_has_ifma", cpu_has_ifma))
                                    if v is not None})
        functions = bind(lib)
    except Unavailable as exc:
        return off(str(exc))
    except AttributeError as exc:
        return off(f"libcrypto_mb.so lacks a function vfl needs: {exc}")
    state = {"engine": fast, "fast": True, "reason": "", "library": str(path), "version": version(lib),
             **functions}
    failure = self_test(state)
    if failure:
        return off(f"{tested} failed vfl's known-answer test against {against} ({failure})")
    return state


def _wheel_files(distribution: str, names) -> dict[str, Path]:
    """The files of an installed wheel whose base name is in ``names`` (by name)."""
    from importlib import metadata

    try:
        dist = metadata.distribution(distribution)
    except metadata.PackageNotFoundError:
        return {}
    found = {}
    for entry in dist.files or ():
        name = Path(str(entry)).name
        if name in names and name not in found:
            path = Path(dist.locate_file(entry)).resolve()
            if path.is_file():
                found[name] = path
    return found


def _library_dirs() -> list[Path]:
    """Where wheels put shared libraries: ``<prefix>/lib`` of this interpreter and of its site-packages."""
    import site
    import sysconfig

    dirs = [Path(sys.prefix) / "lib", Path(sys.base_prefix) / "lib", Path(sysconfig.get_config_var("LIBDIR") or ".")]
    for packages in list(site.getsitepackages()) + [site.getusersitepackages()]:
        dirs.append(Path(packages).parents[1])                  # .../lib/pythonX.Y/site-packages -> .../lib
    seen, out = set(), []
    for d in dirs:
        if d not in seen and d.is_dir():
            seen.add(d)
            out.append(d)
    return out


def locate(name: str, distribution: str) -> Path | None:
    """The path of the shared library ``name`` of the wheel ``distribution``, or ``None``."""
    path = _wheel_files(distribution, {name}).get(name)
    if path is not None:
        return path
    for d in _library_dirs():
        if (d / name).is_file():
            return d / name
    return None


def cpu_has_ifma() -> tuple[bool, str]:
    """Whether this CPU has AVX-512 IFMA (and AVX-512 F), from ``/proc/cpuinfo`` where there is one; why not."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    missing = [f for f in ("avx512f", "avx512ifma") if f not in flags]
                    return (not missing, "" if not missing else f"this CPU lacks {' and '.join(missing)} "
                            "(AVX-512 IFMA: Intel Ice Lake and later, AMD Zen 4 and later)")
    except OSError:
        pass
    return False, "no /proc/cpuinfo to tell whether this CPU has AVX-512 IFMA (Linux x86-64 only)"


def open_library(locate=locate, cpu_has_ifma=cpu_has_ifma) -> tuple[ctypes.CDLL, Path]:
    """``libcrypto_mb.so`` loaded (with Intel's compiler runtime before it) and its path, once per process.

    ``locate`` and ``cpu_has_ifma`` are this module's functions unless a caller passes its own
    (the tests of a missing extra or CPU feature do, through the engines' modules).

    Raises
    ------
    Unavailable
        Not Linux x86-64, no AVX-512 IFMA, the extra not installed, or the library failing to load
        or saying it cannot run its IFMA code here; the message says which.
    """
    machine = platform.machine()
    if not sys.platform.startswith("linux") or machine not in ("x86_64", "AMD64"):
        raise Unavailable(f"the fast engine is for Linux x86-64 (this is {sys.platform} {machine})")
    ok, why = cpu_has_ifma()
    if not ok:
        raise Unavailable(why)
    path = locate("libcrypto_mb.so", "ipp-crypto")
    if path is None:
        raise Unavailable(f"the extra is not installed (libcrypto_mb.so of ipp-crypto not found): "
                          f"pip install \"{EXTRA}\"")
    with _lock:
        lib = _loaded.get(str(path))
        if lib is None:
            lib = _load(path)
            _loaded[str(path)] = lib
    try:
        applicable = lib.mbx_is_crypto_mb_applicable
        applicable.restype, applicable.argtypes = ctypes.c_int, [ctypes.c_uint64]
    except AttributeError as exc:
        raise Unavailable(f"libcrypto_mb.so lacks a function vfl needs: {exc}") from None
    if not applicable(0):
        raise Unavailable("libcrypto_mb.so says this CPU cannot run its AVX-512 IFMA code")
    return lib, path


def _load(path: Path) -> ctypes.CDLL:
    runtime = _wheel_files("intel-cmplr-lib-rt", set(_RUNTIME))
    try:
        for name in _RUNTIME:        # libcrypto_mb.so needs them and carries no rpath to them: load them first
            where = runtime.get(name) or next((d / name for d in [path.parent] + _library_dirs()
                                               if (d / name).is_file()), None)
            if where is None:
                raise Unavailable(f"{name} of Intel's compiler runtime (intel-cmplr-lib-rt) not found: "
                                  f"pip install \"{EXTRA}\"")
            ctypes.CDLL(str(where), mode=ctypes.RTLD_GLOBAL)
        return ctypes.CDLL(str(path))
    except OSError as exc:
        raise Unavailable(f"libcrypto_mb.so failed to load: {exc}") from None


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("revision", ctypes.c_int),
                ("name", ctypes.c_char_p), ("build_date", ctypes.c_char_p), ("text", ctypes.c_char_p)]


def version(lib) -> str:
    """The library's version text, for the record (``"crypto_mb (version unknown)"`` if it will not say)."""
    try:
        get = lib.mbx_getversion
        get.restype, get.argtypes = ctypes.POINTER(_Version), []
        found = get().contents
        return (found.text or b"").decode("ascii", "replace") or f"crypto_mb {found.major}.{found.minor}"
    except Exception:       # the version is for the record only
        return "crypto_mb (version unknown)"
