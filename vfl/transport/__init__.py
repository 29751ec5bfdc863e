"""Named messages between roles, as bytes: the message format, endpoints, transports.

Knows nothing of parties or protocols: only roles (strings), names and fields.
"""

from vfl.transport.endpoint import Endpoint, Transcript, Transport
from vfl.transport.inprocess import InProcessNetwork, run_roles
from vfl.transport.message import BigInts, Message, decode, encode

__all__ = ["BigInts", "Endpoint", "InProcessNetwork", "Message", "Transcript", "Transport", "decode",
           "encode", "run_roles"]
