// ws-secret-client.js: one WebSocket session with the npm package "ws"
// through airlock towards a secret's host or another one
// (tests/integration/572-secrets-ws.sh).
//
//   node ws-secret-client.js URL PROXY_URL PLACEHOLDER
//
// Over https-proxy-agent (CONNECT, TLS intercepted: the sandbox CA in
// NODE_EXTRA_CA_CERTS). Once open it sends one text message in three
// fragments, "tok=" + the placeholder cut in two, with a ping between two
// fragments, waits for the echo and closes 1000. ws offers
// permessage-deflate as it does by default. Prints one JSON line:
// {opened, extensions, echo, pong, close_code, close_reason, error}.
"use strict";
const WebSocket = require("ws");
const { HttpsProxyAgent } = require("https-proxy-agent");

const [url, proxy, ph] = process.argv.slice(2);
const out = { opened: false, extensions: null, echo: null, pong: false,
              close_code: null, close_reason: null, error: null };
let done = false;
function finish() {
	if (done)
		return;
	done = true;
	process.stdout.write(JSON.stringify(out) + "\n");
	process.exit(0);
}
setTimeout(() => { out.error = out.error || "timeout"; finish(); }, 10000);

const ws = new WebSocket(url, { agent: new HttpsProxyAgent(proxy) });
ws.on("open", () => {
	out.opened = true;
	out.extensions = ws.extensions;
	const cut = 7;
	ws.send("tok=", { fin: false });
	ws.send(ph.slice(0, cut), { fin: false });
	ws.ping("p");
	ws.send(ph.slice(cut) + " end", { fin: true });
});
ws.on("pong", () => { out.pong = true; });
ws.on("message", (data) => {
	out.echo = data.toString();
	ws.close(1000, "done");
});
ws.on("unexpected-response", (req, res) => {
	out.error = "unexpected-response " + res.statusCode;
	finish();
});
ws.on("error", (e) => { out.error = String(e && e.message || e); });
ws.on("close", (code, reason) => {
	out.close_code = code;
	out.close_reason = reason.toString();
	finish();
});
