// mcp.js: the official MCP TypeScript SDK (npm "@modelcontextprotocol/sdk")
// as server and as client of the streamable HTTP transport, for
// tests/integration/512-mcp-tools.sh.
//
//   node mcp.js server PORT json|sse
//	an MCP server (stateless) with tools echo, get_weather, get_secret,
//	delete_all; "json" answers POSTs with JSON bodies, "sse" with event
//	streams. GET /calls (not MCP) answers the tools/call counts by tool.
//	Prints "ready" once listening.
//   node mcp.js client URL PROXY_URL
//	connects through the explicit proxy, lists the tools, calls echo and
//	get_secret; prints one JSON line {tools, echo, denied: {code,
//	message}}.
//
// The SDK's client uses fetch, which has no proxy setting: the fetch given
// to it goes through the proxy with node's http and http-proxy-agent.
"use strict";
const http = require("http");
const { Readable } = require("stream");

const [mode, a1, a2] = process.argv.slice(2);

if (mode === "server") {
	const { McpServer } = require("@modelcontextprotocol/sdk/server/mcp.js");
	const { StreamableHTTPServerTransport } =
	    require("@modelcontextprotocol/sdk/server/streamableHttp.js");
	const calls = {};
	const mk = () => {
		const s = new McpServer({ name: "it", version: "1.0.0" });
		for (const t of ["echo", "get_weather", "get_secret",
		    "delete_all"])
			s.registerTool(t, { description: "tool " + t }, async () => {
				calls[t] = (calls[t] || 0) + 1;
				return { content: [{ type: "text", text: t + " ran" }] };
			});
		return s;
	};
	http.createServer(async (req, res) => {
		if (req.url === "/calls") {
			res.setHeader("Content-Type", "application/json");
			res.end(JSON.stringify(calls));
			return;
		}
		const server = mk();
		const transport = new StreamableHTTPServerTransport({
			sessionIdGenerator: undefined,
			enableJsonResponse: a2 === "json",
		});
		res.on("close", () => { transport.close(); server.close(); });
		await server.connect(transport);
		await transport.handleRequest(req, res);
	}).listen(Number(a1), "127.0.0.1", () => console.log("ready"));
} else {
	const { Client } = require("@modelcontextprotocol/sdk/client/index.js");
	const { StreamableHTTPClientTransport } =
	    require("@modelcontextprotocol/sdk/client/streamableHttp.js");
	const { HttpProxyAgent } = require("http-proxy-agent");
	const agent = new HttpProxyAgent(a2);
	const proxyFetch = (url, init = {}) => new Promise((resolve, reject) => {
		const headers = {};
		new Headers(init.headers || {}).forEach((v, k) => { headers[k] = v; });
		const req = http.request(String(url), {
			method: init.method || "GET", headers, agent,
		}, (res) => {
			const h = new Headers();
			for (const [k, v] of Object.entries(res.headers))
				h.set(k, Array.isArray(v) ? v.join(", ") : String(v));
			const st = res.statusCode;
			resolve(new Response(st === 204 || st === 202 ? null :
			    Readable.toWeb(res), { status: st, headers: h }));
		});
		req.on("error", reject);
		if (init.signal)
			init.signal.addEventListener("abort",
			    () => req.destroy(new Error("aborted")));
		req.end(init.body == null ? undefined : init.body);
	});
	(async () => {
		const out = {};
		const client = new Client({ name: "it-client", version: "1.0.0" });
		await client.connect(new StreamableHTTPClientTransport(new URL(a1),
		    { fetch: proxyFetch }));
		out.tools = (await client.listTools()).tools.map((t) => t.name);
		out.echo = (await client.callTool({ name: "echo",
		    arguments: {} })).content[0].text;
		try {
			await client.callTool({ name: "get_secret", arguments: {} });
			out.denied = null;
		} catch (e) {
			out.denied = { code: e.code, message: String(e.message),
			    data: e.data };
		}
		console.log(JSON.stringify(out));
		await client.close();
		process.exit(0);
	})().catch((e) => {
		console.log(JSON.stringify({ threw: String(e && e.stack || e) }));
		process.exit(1);
	});
}
