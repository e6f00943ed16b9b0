"""wsmodes.py: open a WebSocket through airlock in each of its modes and
end it in each way, for 400-ws-close.sh and 401-fault-ws-churn.sh.
Standard library only (wslib for the protocol); the caller's environment
names the ports:

  AIRLOCK_PORT  explicit proxy (default sandbox)
  WS_PORT       ws_upstream.py, plain
  WSS_PORT      ws_upstream.py, TLS, intercepted (rule without intercept)
  SPL_PORT      ws_upstream.py, TLS, spliced (rule intercept: false)
  T             scratch dir: T/pki/ca.crt (upstream CA), T/nobody/ca.crt
                (the sandbox's CA)

Modes: "http" (absolute-form GET with Upgrade to ws://), "wss" (CONNECT,
intercepted TLS, wss://), "splice" (CONNECT, TLS end to end), and, for a
client whose connections the nftables rule redirects (uid 65534),
"t-ws" / "t-wss" (straight to the upstream's address, transparent
listener; plain and intercepted).
"""

import os
import socket
import ssl
import time

import wslib

HOST = b"api.test"
MODES = ("http", "wss", "splice", "t-ws", "t-wss")
# how a session ends: who, and how
ENDS = ("client-close", "client-rst", "client-fin", "client-rst-busy",
        "client-fin-busy", "server-close", "server-rst", "server-fin",
        "server-flood-close", "server-flood-rst", "server-flood-fin")
FLOOD = int(os.environ.get("WS_FLOOD", "600000"))


def env(name):
    return int(os.environ[name])


def _ctx(cafile):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.load_verify_locations(cafile)
    return ctx


# The transparent modes connect from their own source address. From
# 127.0.0.1 a client's 4-tuple could be one that airlockd's own upstream
# connection to the same port used a moment before; if conntrack still
# holds that entry (an RST it judged out of window leaves it ESTABLISHED),
# the client's SYN matches it, skips the nat rule and reaches the upstream
# directly (seen once in 1,000 sessions: the upstream's certificate, not
# the sandbox CA's). The sandbox lists this address too.
T_SRC = os.environ.get("T_SRC", "127.0.0.2")


def _connect_transparent(port, timeout):
    return socket.create_connection(("127.0.0.1", port), timeout,
                                    source_address=(T_SRC, 0))


def _connect_proxy(port, timeout):
    s = socket.create_connection(("127.0.0.1", env("AIRLOCK_PORT")), timeout)
    target = HOST + b":%d" % port
    s.sendall(b"CONNECT " + target + b" HTTP/1.1\r\nHost: " + target +
              b"\r\n\r\n")
    head, rest = wslib.read_head(s)
    if b" 200 " not in head.split(b"\r\n")[0] + b" " or rest:
        raise wslib.Closed("CONNECT refused: %r" % head[:200])
    return s


def open_ws(mode, timeout=10.0):
    """A wslib.Conn after the 101, and its raw TCP socket."""
    T = os.environ["T"]
    sandbox_ca = T + "/nobody/ca.crt"
    if mode == "http":
        port = env("WS_PORT")
        s = socket.create_connection(("127.0.0.1", env("AIRLOCK_PORT")),
                                     timeout)
        raw = s
    elif mode in ("wss", "splice"):
        port = env("WSS_PORT" if mode == "wss" else "SPL_PORT")
        raw = _connect_proxy(port, timeout)
        ca = sandbox_ca if mode == "wss" else T + "/pki/ca.crt"
        s = _ctx(ca).wrap_socket(raw, server_hostname="api.test")
    elif mode == "t-ws":
        port = env("WS_PORT")
        s = raw = _connect_transparent(port, timeout)
    elif mode == "t-wss":
        port = env("WSS_PORT")
        raw = _connect_transparent(port, timeout)
        s = _ctx(sandbox_ca).wrap_socket(raw, server_hostname="api.test")
    else:
        raise ValueError(mode)
    host = HOST + b":%d" % port
    rest = wslib.handshake(s, host, absolute=(mode == "http"))
    return wslib.Conn(s, client=True, buf=rest), raw


def _fin(ws, raw):
    """FIN from the client; TLS: close_notify first (a clean end)."""
    try:
        if isinstance(ws.sock, ssl.SSLSocket):
            ws.sock.settimeout(2)
            ws.sock.unwrap()
    except (OSError, ValueError, ssl.SSLError):
        pass
    try:
        raw.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _until_closed(ws, limit):
    """Read frames until EOF/reset; returns (binary bytes, saw close)."""
    got, saw_close = 0, False
    end = time.time() + limit
    ws.sock.settimeout(limit)
    try:
        while time.time() < end:
            op, data = ws.recv()
            if op == wslib.OP_BINARY:
                got += len(data)
            elif op == wslib.OP_CLOSE:
                saw_close = True
                try:
                    ws.send(data[:2], wslib.OP_CLOSE)
                except OSError:
                    pass
    except (wslib.Closed, OSError, ssl.SSLError):
        return got, saw_close, True
    return got, saw_close, False


def run(mode, how, limit=15.0):
    """One session: open, one echo, end it <how>. Returns a list of
    problems (empty: as expected)."""
    bad = []
    ws, raw = open_ws(mode)
    msg = os.urandom(3000)
    ws.send(msg)
    op, data = ws.recv()
    if (op, data) != (wslib.OP_BINARY, msg):
        bad.append("echo")
    if how == "client-close":
        ws.close()
        _fin(ws, raw)
        _, _, ended = _until_closed(ws, limit)
        if not ended:
            bad.append("gateway kept the connection after the close")
    elif how in ("client-rst", "client-rst-busy"):
        if how.endswith("busy"):
            ws.send(b"x" * 1000000)     # in flight towards the upstream
            ws.send("flood %d close" % FLOOD)
        wslib.abort(raw)
    elif how in ("client-fin", "client-fin-busy"):
        if how.endswith("busy"):
            ws.send("flood %d fin" % FLOOD)     # in flight towards us
        _fin(ws, raw)
        _, _, ended = _until_closed(ws, limit)
        if not ended:
            bad.append("no close after the client's FIN")
    elif how.startswith("server-"):
        what = how.split("-")[-1]
        flood = "-flood-" in how
        ws.send("flood %d %s" % (FLOOD, what) if flood else what)
        got, saw_close, ended = _until_closed(ws, limit)
        if not ended:
            bad.append("no close after the upstream's")
        if flood and what != "rst" and got != FLOOD:
            bad.append("lost data in flight: %d of %d" % (got, FLOOD))
        if what == "close" and not saw_close:
            bad.append("close frame lost")
        _fin(ws, raw)
    else:
        raise ValueError(how)
    try:
        raw.close()
    except OSError:
        pass
    return bad
