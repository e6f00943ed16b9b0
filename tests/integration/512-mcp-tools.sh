#!/bin/sh
# MCP tool policy (issue 21.5) with the official MCP TypeScript SDK (npm
# "@modelcontextprotocol/sdk", tests/compat/mcp.js) as client and server
# on loopback, through the explicit proxy: a rule's mcp: {tools,
# deny_tools} lets the allowed call through, answers a refused one with a
# JSON-RPC error (same id, the SDK's McpError) that the server never sees
# (it counts its calls), and filters tools/list both when the server
# answers with an event stream and with a JSON body. A raw JSON-RPC batch
# (curl: the SDK does not batch) with a refused call is refused whole,
# one error per request, nothing forwarded; an allowed batch passes. A
# client that accepts only text/event-stream gets the error as an event;
# a body that is not JSON-RPC gets 400 mcp_unreadable. The audit records
# carry mcp: {method, tool}.
. "$top_srcdir/tests/integration/lib.sh"
. "$top_srcdir/tests/integration/compat.sh"

compat_need_node
[ -f "$NODE_PATH/@modelcontextprotocol/sdk/package.json" ] ||
    skip "no $NODE_PATH/@modelcontextprotocol/sdk: run npm ci in tests/compat (scripts/install-deps.sh --test)"
command -v curl >/dev/null 2>&1 || skip "curl not found"

# mcp_server NAME json|sse: the SDK's server on a free port ($SRV_PORT)
mcp_server()
{
	SRV_PORT=$(free_port)
	node "$COMPAT_DIR/mcp.js" server "$SRV_PORT" "$2" >"$T/$1.out" \
	    2>"$T/$1.err" &
	track_pid $!
	wait_port "$SRV_PORT" 20 || hard_error "mcp server $1: $(cat "$T/$1.err")"
}
mcp_server sse sse
SSE_PORT=$SRV_PORT
mcp_server json json
JSON_PORT=$SRV_PORT
AIRLOCK_PORT=$(free_port)
{
	config_common "$AIRLOCK_PORT"
	cat <<YAML
upstream:
  allow_networks: ["127.0.0.1/32"]
  hosts: {"sse.mcp.test": "127.0.0.1", "json.mcp.test": "127.0.0.1"}
policies:
  - name: agent
    rules:
      - host: "sse.mcp.test"
        ports: [$SSE_PORT]
        mcp: {tools: ["echo", "get_*"], deny_tools: ["get_secret"]}
      - host: "json.mcp.test"
        ports: [$JSON_PORT]
        mcp: {tools: ["echo", "get_*"], deny_tools: ["get_secret"]}
sandboxes:
  - {id: a, policy: agent, token: "literal:tok-a"}
YAML
} >"$T/airlock.yaml"
"$AIRLOCKD" -t -c "$T/airlock.yaml" >"$T/t.out" 2>&1 ||
    hard_error "config: $(cat "$T/t.out")"

# a bad mcp key is refused with FILE:LINE:COL
sed 's/deny_tools: \["get_secret"\]}/deny_tool: ["x"]}/' "$T/airlock.yaml" \
    >"$T/bad.yaml"
if "$AIRLOCKD" -t -c "$T/bad.yaml" >"$T/bad.out" 2>&1; then
	check_fail "a config with mcp.deny_tool was accepted"
fi
grep -q "bad.yaml:[0-9]*:[0-9]*:.*deny_tool" "$T/bad.out" ||
    check_fail "no FILE:LINE:COL for mcp.deny_tool: $(cat "$T/bad.out")"

start_airlockd "$T/airlock.yaml"
PROXY="http://a:tok-a@127.0.0.1:$AIRLOCK_PORT"

for s in sse json; do
	eval _p=\$$(echo "$s" | tr a-z A-Z)_PORT
	node "$COMPAT_DIR/mcp.js" client "http://$s.mcp.test:$_p/mcp" \
	    "$PROXY" >"$T/client-$s.json" 2>"$T/client-$s.err" ||
	    check_fail "SDK client via $s: $(cat "$T/client-$s.json" "$T/client-$s.err")"
done

# raw batches, and an SSE-only client (curl)
BATCH_BAD='[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"delete_all","arguments":{}}},{"jsonrpc":"2.0","method":"notifications/initialized"}]'
BATCH_OK='[{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo","arguments":{}}},{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"get_weather","arguments":{}}}]'
post()
{
	# post PORT ACCEPT BODY OUT: status and body of a POST via the proxy
	curl -s -o "$T/$4.body" -w '%{http_code}' -x "$PROXY" \
	    -H "Content-Type: application/json" -H "Accept: $2" \
	    -H "MCP-Protocol-Version: 2025-03-26" \
	    --data-binary "$3" "http://json.mcp.test:$1/mcp" >"$T/$4.code"
}
post "$JSON_PORT" "application/json, text/event-stream" "$BATCH_BAD" bbad
post "$JSON_PORT" "application/json, text/event-stream" "$BATCH_OK" bok
post "$JSON_PORT" "text/event-stream" \
    '{"jsonrpc":"2.0","id":"s1","method":"tools/call","params":{"name":"delete_all"}}' ssed
post "$JSON_PORT" "application/json, text/event-stream" 'not json' njson
curl -s "http://127.0.0.1:$SSE_PORT/calls" >"$T/calls-sse.json"
curl -s "http://127.0.0.1:$JSON_PORT/calls" >"$T/calls-json.json"
sleep 0.3

T=$T PYTHONPATH=$top_srcdir/tests/integration "$PYTHON" - <<'PY' || check_fail "mcp tool policy"
import json, os
T = os.environ["T"]
rd = lambda n: open(os.path.join(T, n)).read()
bad = []
def want(c, what):
    if not c:
        bad.append(what)
for s in ("sse", "json"):
    c = json.loads(rd("client-%s.json" % s))
    want(sorted(c.get("tools", [])) == ["echo", "get_weather"],
         "%s: tools/list filtered: %r" % (s, c))
    want(c.get("echo") == "echo ran", "%s: allowed call: %r" % (s, c))
    d = c.get("denied") or {}
    want(d.get("code") == -32001 and "mcp_tool_denied" in d.get("message", "")
         and (d.get("data") or {}).get("reason") == "mcp_tool_denied",
         "%s: refused call as McpError: %r" % (s, c))
    want("get_secret" not in d.get("message", ""), "%s: tool echoed" % s)
sse_calls = json.loads(rd("calls-sse.json"))
json_calls = json.loads(rd("calls-json.json"))
want(sse_calls == {"echo": 1}, "sse server saw %r" % sse_calls)
# echo: the SDK client's and the allowed batch's; get_weather: the batch's
want(json_calls == {"echo": 2, "get_weather": 1},
     "json server saw %r" % json_calls)
want(rd("bbad.code") == "200", "refused batch status " + rd("bbad.code"))
b = json.loads(rd("bbad.body"))
want(isinstance(b, list) and sorted(e["id"] for e in b) == [1, 2] and
     all(e["error"]["code"] == -32001 for e in b),
     "refused batch answer %r" % b)
want(rd("bok.code") == "200", "allowed batch status " + rd("bok.code"))
ok = json.loads(rd("bok.body"))
want(isinstance(ok, list) and sorted(e["id"] for e in ok) == [1, 2] and
     all("result" in e for e in ok), "allowed batch answer %r" % ok)
ev = rd("ssed.body")
want(rd("ssed.code") == "200" and ev.startswith("event: message\ndata: ")
     and '"id":"s1"' in ev, "event-stream refusal %r" % ev)
want(rd("njson.code") == "400" and "mcp_unreadable" in rd("njson.body"),
     "not JSON-RPC: %s %s" % (rd("njson.code"), rd("njson.body")))
recs = [json.loads(l) for l in open(os.path.join(T, "audit.jsonl"))]
mcp = [r for r in recs if "mcp" in r]
calls = [(r["mcp"].get("tool"), r["decision"], r.get("reason"))
         for r in mcp if r["mcp"]["method"] == "tools/call"]
want(("get_secret", "deny", "mcp: tools/call of a tool the rule does not "
      "allow") in calls, "no deny record of get_secret: %r" % calls)
want(("echo", "allow", None) in [(a, b, None) for a, b, c in calls],
     "no allow record of echo: %r" % calls)
want(any(r["mcp"] == {"method": "batch", "tool": "delete_all"} and
         r["decision"] == "deny" for r in mcp), "batch record: %r" % mcp)
want(any(r["mcp"] == {"method": "tools/list"} for r in mcp),
     "tools/list record: %r" % mcp)
if bad:
    print("\n".join(bad))
    raise SystemExit(1)
PY
stop_airlockd
finish
