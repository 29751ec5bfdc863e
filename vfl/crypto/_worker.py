"""Entry point of a vfl worker process (started by :mod:`vfl.crypto.workers`).

Reads length-prefixed pickled ``(module, function, args)`` tasks from stdin and
writes ``(ok, result_or_exception)`` to stdout until stdin closes.  Only its
parent writes to its stdin.
"""

import importlib
import os
import pickle
import sys


def main() -> None:
    from vfl.crypto.workers import _read_frame, _write_frame

    # The protocol owns the real stdout; anything printed goes to stderr instead.
    wire_out = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    sys.stdout = sys.stderr
    wire_in = sys.stdin.buffer
    allowed = ("vfl.crypto.",)
    while True:
        try:
            frame = _read_frame(wire_in)
        except EOFError:
            break
        try:
            module, name, args = pickle.loads(frame)
            if not module.startswith(allowed):
                raise ValueError(f"refusing task {module}.{name}")
            fn = getattr(importlib.import_module(module), name)
            reply = (True, fn(*args))
        except Exception as exc:               # the parent re-raises it
            reply = (False, exc)
        try:
            payload = pickle.dumps(reply, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            payload = pickle.dumps((False, RuntimeError(f"unpicklable worker result: {exc!r}")))
        try:
            _write_frame(wire_out, payload)
        except (BrokenPipeError, OSError):
            break


if __name__ == "__main__":
    main()
