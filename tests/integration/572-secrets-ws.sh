#!/bin/sh
# Placeholders in WebSocket frames (issue 20.2): node's "ws" package,
# unmodified, through CONNECT + TLS interception to a recording echo
# upstream (compat_upstream.py). Towards the secret's host (placeholder_in:
# [header, ws]): a text message in three masked fragments with a ping
# between two of them and the placeholder cut across fragments reaches the
# upstream with the real value, still fragmented and masked, no reserved
# bits; the echo comes back to the client redacted; permessage-deflate,
# which ws offers, is not negotiated (Sec-WebSocket-Extensions never
# reaches the upstream); the audit says "wsk@ws". Towards another host the
# same message closes the connection with 1008 both ways, nothing of the
# placeholder upstream, audited "deny". Nothing airlockd wrote holds the
# value in any encoding.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/compat.sh"

compat_need_node
compat_pki
start_compat_up wss -C "$T/pki/compat.crt" -K "$T/pki/compat.key"
WSS_PORT=$PY_PORT
AIRLOCK_PORT=$(free_port)
R=$("$PYTHON" -c 'import secrets; print(secrets.token_hex(6))')
PH="airlock:wsk:$R"
printf 'wsv-LEAK/%s+"q\\&=v' "$R" >"$T/wsk.val"
chmod 600 "$T/wsk.val"
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  ca_file: $T/pki/ca.crt
  allow_networks: ["127.0.0.1/32"]
  hosts: {"api.test": "127.0.0.1", "ws.test": "127.0.0.1"}
secrets:
  - name: wsk
    source: file:$T/wsk.val
    hosts: ["api.test"]
    placeholder: "$PH"
    placeholder_in: [header, ws]
policies:
  - name: p
    rules:
      - {host: "api.test", ports: [$WSS_PORT], paths: ["/ws/*"]}
      - {host: "ws.test", ports: [$WSS_PORT], paths: ["/ws/*"]}
sandboxes:
  - {id: n, policy: p, token: "literal:tok-n"}
YAML
} >"$T/airlock.yaml"
start_airlockd "$T/airlock.yaml"
PROXY=http://n:tok-n@127.0.0.1:$AIRLOCK_PORT
NODE_EXTRA_CA_CERTS=$T/state/ca/n/ca.crt
export NODE_EXTRA_CA_CERTS T PH

for tag in bound other; do
	host=api.test
	[ "$tag" = bound ] || host=ws.test
	(cd "$COMPAT_DIR" && node ws-secret-client.js \
	    "wss://$host:$WSS_PORT/ws/$tag" "$PROXY" "$PH" \
	    >"$T/node-$tag.out" 2>"$T/node-$tag.err")
	echo "# $tag: $(cat "$T/node-$tag.out") $(head -c 300 "$T/node-$tag.err")"
done

"$PYTHON" - <<'PY' || check_fail "WebSocket frame checks"
import json, os, time
import itlib

E = os.environ
T, PH = E["T"], E["PH"]
VAL = open(T + "/wsk.val").read()
t = itlib.Checks()


def client(tag):
    try:
        return json.loads(open(T + "/node-%s.out" % tag).read())
    except ValueError:
        return {}


def events():
    with open(T + "/wss.jsonl") as f:
        return [json.loads(x) for x in f if x.strip()]


def conn_of(tag, ev):
    req = [e for e in ev if e["ev"] == "request" and
           e["target"] == "/ws/" + tag]
    return req[0] if len(req) == 1 else None


# the upstream logs the close before it answers: wait for it
end = time.time() + 5
while time.time() < end:
    ev = events()
    done = [conn_of(tg, ev) for tg in ("bound", "other")]
    if all(r is not None and any(e.get("conn") == r["conn"] and
           e["ev"] in ("ws_close", "ws_eof") for e in ev) for r in done):
        break
    time.sleep(0.1)

# --- towards the secret's host
o = client("bound")
t.ok(o.get("opened") is True, "bound: the handshake completes", o)
t.ok(o.get("extensions") == "", "bound: no extension negotiated "
     "(permessage-deflate off)", o)
t.ok(o.get("echo") == "tok=[airlock:redacted:wsk] end",
     "bound: the echo reaches the client redacted", o)
t.ok(o.get("pong") is True, "bound: the ping between fragments is answered",
     o)
t.ok(o.get("close_code") == 1000, "bound: clean close 1000", o)
req = conn_of("bound", ev)
if t.ok(req is not None, "bound: the upstream got the upgrade"):
    head = req["head"].lower()
    t.ok("sec-websocket-extensions" not in head,
         "bound: Sec-WebSocket-Extensions left out upstream", head)
    mine = [e for e in ev if e.get("conn") == req["conn"]]
    msgs = [e for e in mine if e["ev"] == "ws_msg"]
    t.ok([m["data"] for m in msgs] == ["tok=" + VAL + " end"],
         "bound: the upstream got the message with the real value",
         [m["data"].replace(VAL, "<VAL>") for m in msgs])
    frames = [e for e in mine if e["ev"] == "ws_frame"]
    data = [f for f in frames if f["op"] in (0, 1, 2)]
    t.ok(len(data) >= 2 and not data[0]["fin"] and data[-1]["fin"] and
         data[0]["op"] == 1 and all(f["op"] == 0 for f in data[1:]),
         "bound: the message arrives fragmented", frames)
    t.ok(all(f["masked"] and f["rsv"] == 0 for f in frames),
         "bound: every frame masked, no reserved bit", frames)
    t.ok(any(f["op"] == 9 for f in frames), "bound: the ping went upstream",
         frames)
a = itlib.audit_wait(T + "/audit.jsonl", lambda a: a.get("path") ==
                     "/ws/bound", 10)
t.ok(a is not None and a.get("status") == 101 and
     "wsk@ws" in (a.get("secrets_at") or []),
     "bound: audit status 101, secrets_at has wsk@ws", a)

# --- towards another host
o = client("other")
t.ok(o.get("opened") is True, "other: the handshake completes", o)
t.ok(o.get("close_code") == 1008 and o.get("echo") is None,
     "other: the client gets close 1008, no echo", o)
req = conn_of("other", ev)
if t.ok(req is not None, "other: the upstream got the upgrade"):
    mine = [e for e in ev if e.get("conn") == req["conn"]]
    t.ok(not [e for e in mine if e["ev"] == "ws_msg"],
         "other: no message upstream", mine)
    t.ok(not any("airlock:wsk" in json.dumps(e) for e in mine),
         "other: nothing of the placeholder upstream", mine)
    t.ok(any(e["ev"] == "ws_close" and e["code"] == 1008 for e in mine),
         "other: the upstream gets close 1008", mine)
a = itlib.audit_wait(T + "/audit.jsonl", lambda a: a.get("path") ==
                     "/ws/other", 10)
t.ok(a is not None and a.get("decision") == "deny" and
     "1008" in (a.get("reason") or ""),
     "other: audited deny, the reason says 1008", a)
t.done()
PY

sleep 0.3
stop_airlockd

"$PYTHON" - <<'PY' || check_fail "leak search"
import os
import itlib, seclib

T = os.environ["T"]
t = itlib.Checks()
t.ok(os.path.getsize(T + "/audit.jsonl") > 0, "the audit has content")
found = seclib.leaks(T, {"wsk": open(T + "/wsk.val", "rb").read()})
t.ok(not found, "no value in any form in anything airlockd wrote",
     repr(found[:5]))
t.done()
PY
finish
