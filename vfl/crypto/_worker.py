"""Entry point of a vfl worker process (started by :mod:`vfl.crypto.workers`).

Reads length-prefixed ``(module, function, args)`` tasks (:mod:`vfl.crypto._codec`)
from stdin and writes ``(True, result)`` or ``(False, error type, message)`` to
stdout until stdin closes.  Only its parent writes to its stdin, and only
functions of ``vfl.crypto`` modules are run.
"""

import importlib
import os
import sys


def main() -> None:
    from vfl.crypto import _codec
    from vfl.crypto.workers import _read_frame, _write_frame

    # The protocol owns the pipe that was stdout; anything printed (by Python or C) goes to stderr.
    wire_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    wire_in = sys.stdin.buffer
    allowed = ("vfl.crypto.",)
    while True:
        try:
            frame = _read_frame(wire_in)
        except EOFError:
            break
        try:
            module, name, args = _codec.decode(frame)
            if not module.startswith(allowed) or not name.startswith("_task_"):
                raise ValueError(f"refusing task {module}.{name}")
            fn = getattr(importlib.import_module(module), name)
            payload = _codec.encode_parts((True, fn(*args)))
        except Exception as exc:               # the parent raises it as a WorkerError
            payload = _codec.encode_parts((False, type(exc).__name__, str(exc)))
        try:
            _write_frame(wire_out, payload)
        except (BrokenPipeError, OSError):
            break


if __name__ == "__main__":
    main()
