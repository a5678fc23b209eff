"""The gateway's and the egress proxy's servers on a TCP address instead of a unix socket.

    class ClusterGateway(Gateway, OnTcp): ...       # before PrivateUnixServer in the MRO
    server = ClusterGateway(..., address=("127.0.0.1", 8080))

A broker on a cluster is reached by the agents' Pods over the network, so it cannot tell them
apart by the socket they came on; everything above the listening socket (the strict reader,
the request path, the proxy) is the same code. `OnTcp` replaces only what a
`PrivateUnixServer` does with its socket file: bind, listen, close.
"""

from __future__ import annotations

import socket
import socketserver
from pathlib import Path

from flower import text
from flowerbox.errors import BrokerError
from flowerbox.sidecar.admission import Admitted
from flowerbox.sidecar.proxy import PrivateUnixServer

__all__ = ["OnTcp", "parse_address"]


class OnTcp(Admitted, PrivateUnixServer):
    """A PrivateUnixServer's subclass listening on `tcp_address` (set before its __init__):
    listed after that subclass and so before PrivateUnixServer in the MRO, its bind, listen
    and close are the TCP server's, and no socket file is made or removed. Its connections
    are admitted per peer and in all (flowerbox.sidecar.admission)."""

    allow_reuse_address = True  # a restarted broker binds its port again at once
    request_queue_size = 1024  # a burst of connections waits to be admitted or turned away
    tcp_address: tuple[str, int]

    def __init__(self, socket_path: Path, handler: type[socketserver.BaseRequestHandler]) -> None:
        host = self.tcp_address[0]
        self.address_family = socket.AF_INET6 if ":" in host else socket.AF_INET
        super().__init__(socket_path, handler)

    def server_bind(self) -> None:
        # TCPServer.server_bind, which this replaces, is where allow_reuse_address is applied:
        # without it a port whose refused connections (closed by the broker first) wait out
        # TIME_WAIT cannot be bound again for a minute after a restart.
        self.socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.socket.bind(self.tcp_address)
        self.server_address = self.socket.getsockname()[:2]

    def server_activate(self) -> None:
        self.socket.listen(self.request_queue_size)

    def server_close(self) -> None:
        socketserver.TCPServer.server_close(self)


def parse_address(address: str, flag: str = "--listen") -> tuple[str, int]:
    """`HOST:PORT` (`[v6]:PORT`) as a socket address (`flag`: the option that gave it).

    Raises:
        BrokerError: no port, or one out of range.
    """
    host, _, port = address.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise BrokerError(text("broker.bad_address", flag=flag, address=repr(address)))
    return host, int(port)
