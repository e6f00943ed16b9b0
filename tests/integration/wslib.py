"""wslib.py: a small RFC 6455 WebSocket codec and client for the tunnel
tests (tests/integration/40x-ws-*.sh); standard library only, so it runs
under any python3. ws_upstream.py is the server side.

  handshake(sock, host, path, absolute)  client upgrade; absolute=True
                                         sends the absolute-form target
                                         an explicit proxy wants
  Conn(sock, client)                     send()/recv() frames, close()
  abort(sock)                            RST (SO_LINGER 0)
"""

import base64
import hashlib
import os
import socket
import struct

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 1, 2, 8, 9, 10


class Closed(Exception):
    """The peer closed the connection (EOF or reset) mid-frame."""


def accept_key(key):
    return base64.b64encode(hashlib.sha1(key + GUID).digest())


def read_head(sock, buf=b""):
    """Read up to the end of an HTTP head; returns (head, rest)."""
    while b"\r\n\r\n" not in buf:
        d = sock.recv(65536)
        if not d:
            raise Closed("EOF in the HTTP head: %r" % buf[:200])
        buf += d
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


def handshake(sock, host, path=b"/ws", absolute=False, extra=b""):
    """Client side of the upgrade on a connected <sock>; returns the
    bytes already read past the 101 (frames)."""
    key = base64.b64encode(os.urandom(16))
    target = (b"http://" + host + path) if absolute else path
    sock.sendall(b"GET " + target + b" HTTP/1.1\r\nHost: " + host + b"\r\n"
                 b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                 b"Sec-WebSocket-Key: " + key + b"\r\n"
                 b"Sec-WebSocket-Version: 13\r\n" + extra + b"\r\n")
    head, rest = read_head(sock)
    status = head.split(b"\r\n", 1)[0]
    if b" 101 " not in status + b" ":
        raise Closed("no 101: %r" % head[:300])
    if accept_key(key) not in head:
        raise Closed("bad Sec-WebSocket-Accept: %r" % head)
    return rest


def frame(op, payload, mask):
    """One final frame; clients mask (RFC 6455 5.3)."""
    n = len(payload)
    b1 = 0x80 if mask else 0
    if n < 126:
        hdr = struct.pack("!BB", 0x80 | op, b1 | n)
    elif n < 65536:
        hdr = struct.pack("!BBH", 0x80 | op, b1 | 126, n)
    else:
        hdr = struct.pack("!BBQ", 0x80 | op, b1 | 127, n)
    if not mask:
        return hdr + payload
    key = os.urandom(4)
    return hdr + key + xor(payload, key)


def xor(data, key):
    if not data:
        return b""
    k = (key * (len(data) // 4 + 1))[:len(data)]
    return (int.from_bytes(data, "big") ^ int.from_bytes(k, "big")).to_bytes(
        len(data), "big")


def abort(sock):
    """Close with RST: the abrupt end of a connection."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                        struct.pack("ii", 1, 0))
    except OSError:
        pass
    sock.close()


class Conn:
    """Frames over a connected (plain or TLS) socket."""

    def __init__(self, sock, client=True, buf=b""):
        self.sock = sock
        self.client = client
        self.buf = buf

    def _need(self, n):
        while len(self.buf) < n:
            try:
                d = self.sock.recv(65536)
            except (ConnectionResetError, BrokenPipeError) as e:
                raise Closed(str(e))
            if not d:
                raise Closed("EOF")
            self.buf += d
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def send(self, payload, op=OP_BINARY):
        if isinstance(payload, str):
            payload, op = payload.encode(), OP_TEXT
        self.sock.sendall(frame(op, payload, self.client))

    def recv(self):
        """(opcode, payload) of the next frame; fragments are joined."""
        data, first = b"", None
        while True:
            b0, b1 = self._need(2)
            n = b1 & 0x7f
            if n == 126:
                n = struct.unpack("!H", self._need(2))[0]
            elif n == 127:
                n = struct.unpack("!Q", self._need(8))[0]
            key = self._need(4) if b1 & 0x80 else None
            payload = self._need(n)
            if key:
                payload = xor(payload, key)
            op = b0 & 0x0f
            if op >= 8:
                return op, payload
            if first is None:
                first = op
            data += payload
            if b0 & 0x80:
                return first, data

    def close(self, code=1000):
        """Send a close frame and wait for the peer's."""
        self.send(struct.pack("!H", code), OP_CLOSE)
        while True:
            op, _ = self.recv()
            if op == OP_CLOSE:
                return
