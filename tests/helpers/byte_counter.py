"""A TCP forwarder on 127.0.0.1 that counts the bytes clients send through it (what a pusher uploads).

Put it between a process and moto (the process's endpoint_url is the forwarder's): every byte that
left the client counts, also those of a request cut short by a SIGKILL, which a count kept by the
client itself would lose.
"""

from __future__ import annotations

import contextlib
import socket
import threading

HOST = "127.0.0.1"
BLOCK = 1 << 16


class ByteCounter:
    def __init__(self, target_host: str, target_port: int) -> None:
        self.target = (target_host, target_port)
        self.sent = 0  # bytes clients sent towards the target
        self._lock = threading.Lock()
        self._listener = socket.create_server((HOST, 0))
        self.port = int(self._listener.getsockname()[1])
        self.endpoint_url = f"http://{HOST}:{self.port}"
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="byte-counter").start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _address = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            threading.Thread(target=self._pipe, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pipe, args=(server, client, False), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, upload: bool) -> None:
        try:
            while data := source.recv(BLOCK):
                if upload:
                    with self._lock:
                        self.sent += len(data)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            for end in (source, sink):
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
            source.close()  # the other direction's thread closes `sink`

    def take(self) -> int:
        """The bytes counted since the last take."""
        with self._lock:
            sent, self.sent = self.sent, 0
        return sent

    def close(self) -> None:
        self._closed = True
        self._listener.close()
