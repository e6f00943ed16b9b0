// ws-client.js: one WebSocket session with the npm package "ws" through
// airlock (tests/integration/450-compat-ws.sh).
//
//   node ws-client.js URL PROXY_URL AGENT CLOSE_BY TAG
//
// AGENT: "http" (http-proxy-agent: absolute-form GET with Upgrade) or
// "https" (https-proxy-agent: CONNECT, then the handshake inside the
// tunnel, TLS for wss://). CLOSE_BY: "client" (ws.close(1000, "done")),
// "server" (asks the upstream to close by sending "server-close"),
// "client-abort" (ws.terminate(): no close frame) or "server-abort" (the
// upstream drops the connection without a close frame).
// Prints one JSON line: {opened, echo, close_code, close_reason, error}.
// The CA for wss:// comes from NODE_EXTRA_CA_CERTS, as in a sandbox.
"use strict";
const WebSocket = require("ws");
const { HttpProxyAgent } = require("http-proxy-agent");
const { HttpsProxyAgent } = require("https-proxy-agent");

const [url, proxy, agentKind, closeBy, tag] = process.argv.slice(2);
const agent = agentKind === "http" ? new HttpProxyAgent(proxy)
                                   : new HttpsProxyAgent(proxy);
const out = { opened: false, echo: null, close_code: null,
              close_reason: null, error: null };
let done = false;
function finish() {
	if (done)
		return;
	done = true;
	process.stdout.write(JSON.stringify(out) + "\n");
	process.exit(0);
}
setTimeout(() => { out.error = out.error || "timeout"; finish(); }, 15000);

const ws = new WebSocket(url, { agent });
ws.on("open", () => {
	out.opened = true;
	ws.send("hello " + tag);
});
ws.on("message", (data) => {
	out.echo = data.toString();
	if (closeBy === "client")
		ws.close(1000, "done");
	else if (closeBy === "client-abort")
		ws.terminate();	// the socket destroyed, no close frame
	else
		ws.send(closeBy === "server" ? "server-close" : "server-abort");
});
ws.on("unexpected-response", (req, res) => {
	out.error = "unexpected-response " + res.statusCode;
	let body = "";
	res.on("data", (d) => { body += d; });
	res.on("end", () => { out.body = body; finish(); });
});
ws.on("error", (e) => { out.error = String(e && e.message || e); });
ws.on("close", (code, reason) => {
	out.close_code = code;
	out.close_reason = reason.toString();
	finish();
});
