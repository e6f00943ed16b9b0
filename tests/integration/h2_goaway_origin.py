#!/usr/bin/env python3
"""An HTTP/2-only TLS origin (python-h2) that sends GOAWAY under load, for
the upstream h2 tests.

  h2_goaway_origin.py -P PORTFILE --cert C --key K -l LOG

Every stream is answered 200 with body "conn N stream S path P", except on
the first connection: its second request is held until a third arrives
(or 3 s pass); then the second is answered, GOAWAY goes out with
last_stream_id = the second's id, and the third is never answered (the
client must retry it on a new connection or fail it). Each request is
logged as a JSON line {conn, stream, path}.
"""
import argparse
import json
import os
import socket
import ssl
import threading
import time

import h2.config
import h2.connection
import h2.events

LOCK = threading.Lock()
NCONN = [0]


def serve(sock, n, log):
    conn = h2.connection.H2Connection(
        h2.config.H2Configuration(client_side=False))
    conn.initiate_connection()
    sock.sendall(conn.data_to_send())
    paths, order, held, goaway_at = {}, [], None, None
    sock.settimeout(0.2)
    while True:
        try:
            data = sock.recv(65536)
            if not data:
                return
        except socket.timeout:
            data = b""
        except (OSError, ssl.SSLError):
            return
        for ev in conn.receive_data(data) if data else []:
            if isinstance(ev, h2.events.RequestReceived):
                p = dict(ev.headers).get(b":path", b"").decode()
                paths[ev.stream_id] = p
                order.append(ev.stream_id)
                with LOCK:
                    log.write(json.dumps({"conn": n, "stream": ev.stream_id,
                                          "path": p}) + "\n")
                    log.flush()
                if n == 1 and len(order) == 2:
                    held = (ev.stream_id, time.time())
                    continue
                if n == 1 and len(order) == 3 and held is not None:
                    continue        # above last_stream_id: never answered
                answer(conn, n, ev.stream_id, p)
            elif isinstance(ev, h2.events.DataReceived):
                conn.acknowledge_received_data(ev.flow_controlled_length,
                                               ev.stream_id)
        if held is not None and goaway_at is None and (
                len(order) >= 3 or time.time() - held[1] > 3):
            answer(conn, n, held[0], paths[held[0]])
            conn.close_connection(last_stream_id=held[0])
            goaway_at = time.time()
        out = conn.data_to_send()
        if out:
            sock.sendall(out)
        if goaway_at is not None and time.time() - goaway_at > 2:
            return


def answer(conn, n, sid, path):
    body = ("conn %d stream %d path %s" % (n, sid, path)).encode()
    conn.send_headers(sid, [(":status", "200"),
                            ("content-length", str(len(body)))])
    conn.send_data(sid, body, end_stream=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-P", dest="portfile", required=True)
    ap.add_argument("--cert", required=True)
    ap.add_argument("--key", required=True)
    ap.add_argument("-l", dest="log", required=True)
    a = ap.parse_args()
    log = open(a.log, "a")
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(a.cert, a.key)
    ctx.set_alpn_protocols(["h2"])
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    with open(a.portfile + ".tmp", "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    os.rename(a.portfile + ".tmp", a.portfile)
    while True:
        s, _ = ls.accept()
        try:
            s = ctx.wrap_socket(s, server_side=True)
        except (OSError, ssl.SSLError):
            s.close()
            continue
        if s.selected_alpn_protocol() != "h2":
            s.close()
            continue
        NCONN[0] += 1
        threading.Thread(target=serve, args=(s, NCONN[0], log),
                         daemon=True).start()


if __name__ == "__main__":
    main()
