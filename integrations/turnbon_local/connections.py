"""Hanging up on the embedded server's clients, so that stopping it never waits on one.

llama.cpp answers a request from an HTTP handler thread that waits for the decode loop's
result. When the loop stops first, that handler waits until its client hangs up, and the
server's destructor (which holds the GIL) waits for the handler: a client in this very
process could then never hang up. The server's accepted sockets are file descriptors of
this process, so before the stop we shut them down ourselves: each handler then sees its
client gone and returns. This reads /proc (Linux); elsewhere it does nothing.
"""

from __future__ import annotations

import contextlib
import os
import socket
from pathlib import Path

_PROC_TCP = Path("/proc/net/tcp")
_PROC_FDS = Path("/proc/self/fd")
_LISTEN = "0A"


def server_connection_inodes(port: int, host: str = "127.0.0.1") -> set[int]:
    """Socket inodes of the connections accepted on host:port (the listener excluded)."""
    if not _PROC_TCP.exists():
        return set()
    packed = socket.inet_aton(host)[::-1].hex().upper()  # /proc shows it little-endian
    local = f"{packed}:{port:04X}"
    inodes: set[int] = set()
    for line in _PROC_TCP.read_text().splitlines()[1:]:
        fields = line.split()
        if len(fields) > 9 and fields[1] == local and fields[3] != _LISTEN:
            inodes.add(int(fields[9]))
    return inodes


def hang_up_connections(port: int, host: str = "127.0.0.1") -> int:
    """Shut down (not close) this process's accepted sockets on host:port; returns how many.

    The descriptors stay open and owned by the server, which closes them itself.
    """
    inodes = server_connection_inodes(port, host)
    if not inodes or not _PROC_FDS.exists():
        return 0
    done = 0
    for entry in _PROC_FDS.iterdir():
        with contextlib.suppress(OSError, ValueError):
            target = os.readlink(entry)
            if not target.startswith("socket:["):
                continue
            inode, fd = int(target[len("socket:[") : -1]), int(entry.name)
            if inode not in inodes:
                continue
            sock = socket.socket(fileno=fd)
            try:
                if os.fstat(fd).st_ino == inode:  # still the same socket
                    sock.shutdown(socket.SHUT_RDWR)
                    done += 1
            finally:
                sock.detach()
    return done
