"""A TCP proxy the tests can cut, to make a database unreachable for a while (or slow)."""

from __future__ import annotations

import contextlib
import socket
import threading
import time


class CuttableProxy:
    """Forwards 127.0.0.1:<port> to ``target``; ``cut()`` drops every connection and
    refuses new ones until ``restore()``. ``reply_delay``: seconds each chunk from the
    target waits before it is passed on (a slow server)."""

    def __init__(self, target: tuple[str, int], reply_delay: float = 0.0) -> None:
        self.target = target
        self.reply_delay = reply_delay
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._stop = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._stop:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if not self._open.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._conns |= {client, upstream}
            for a, b, delay in ((client, upstream, 0.0), (upstream, client, self.reply_delay)):
                threading.Thread(target=self._pipe, args=(a, b, delay), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket, delay: float = 0.0) -> None:
        try:
            while data := src.recv(65536):
                if delay:
                    time.sleep(delay)
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            with self._lock:
                self._conns -= {src, dst}

    def cut(self) -> None:
        self._open.clear()
        with self._lock:
            conns = list(self._conns)
        for s in conns:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def restore(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._stop = True
        self.cut()
        self._server.close()
