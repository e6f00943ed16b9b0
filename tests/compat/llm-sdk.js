// llm-sdk.js: one call with the real OpenAI or Anthropic SDK (npm "openai",
// "@anthropic-ai/sdk") through airlock's explicit proxy, plain HTTP
// (tests/integration/493-budget-sdk-errors.sh, 495-budget-cut-stream.sh).
//
//   node llm-sdk.js SDK CALL BASE_URL PROXY_URL [JSON_EXTRA]
//
// SDK: openai | anthropic. CALL: chat (non-streaming), stream (streaming,
// every chunk kept). JSON_EXTRA is merged into the request params. The
// SDKs use fetch, which has no proxy setting: the fetch given to them goes
// through the proxy with node's http and http-proxy-agent, and decodes
// gzip/br/deflate bodies as fetch does. The environment's LLM_SDK_HEADERS
// (a JSON object) are sent with every request (the mock's X-Synth
// controls). Prints one JSON line:
//   {ok, status, message, error_type, error_code, request_id, chunks,
//    text, usage_chunks, empty_choices, threw, content_encoding}
// (request_id and content_encoding: of the last response's head)
"use strict";
const http = require("http");
const zlib = require("zlib");
const { Readable } = require("stream");
const { HttpProxyAgent } = require("http-proxy-agent");

const [sdk, call, baseURL, proxy, extraJson] = process.argv.slice(2);
const extra = extraJson ? JSON.parse(extraJson) : {};
const agent = new HttpProxyAgent(proxy);
const defaultHeaders = JSON.parse(process.env.LLM_SDK_HEADERS || "{}");

function proxyFetch(url, init = {}) {
	return new Promise((resolve, reject) => {
		const headers = {};
		new Headers(init.headers || {}).forEach((v, k) => { headers[k] = v; });
		const req = http.request(String(url), {
			method: init.method || "GET", headers, agent,
		}, (res) => {
			const h = new Headers();
			for (const [k, v] of Object.entries(res.headers))
				h.set(k, Array.isArray(v) ? v.join(", ") : String(v));
			let body = res;
			const ce = (res.headers["content-encoding"] || "").trim();
			// what came over the wire, for the caller's checks
			out.content_encoding = ce || null;
			if (res.headers["x-airlock-request-id"])
				out.request_id = res.headers["x-airlock-request-id"];
			if (ce === "gzip" || ce === "x-gzip")
				body = res.pipe(zlib.createGunzip());
			else if (ce === "br")
				body = res.pipe(zlib.createBrotliDecompress());
			else if (ce === "deflate")
				body = res.pipe(zlib.createInflate());
			res.on("aborted", () => body.destroy(new Error("aborted")));
			resolve(new Response(res.statusCode === 204 ? null :
			    Readable.toWeb(body), { status: res.statusCode, headers: h }));
		});
		req.on("error", reject);
		if (init.signal)
			init.signal.addEventListener("abort",
			    () => req.destroy(new Error("aborted")));
		if (init.body == null)
			req.end();
		else if (typeof init.body === "string" ||
		    init.body instanceof Uint8Array)
			req.end(init.body);
		else
			req.end(Buffer.from(init.body));
	});
}

const out = { ok: false, status: null, message: null, error_type: null,
    error_code: null, request_id: null, chunks: 0, text: "",
    usage_chunks: 0, empty_choices: 0, threw: null,
    content_encoding: null };

async function main() {
	let client, params;
	if (sdk === "openai") {
		const OpenAI = require("openai");
		client = new OpenAI({ apiKey: "sk-test", baseURL, maxRetries: 0,
		    timeout: 20000, fetch: proxyFetch, defaultHeaders });
		params = Object.assign({ model: "gpt-4o-mini", max_tokens: 100,
		    messages: [{ role: "user", content: "hi" }] }, extra);
	} else {
		const Anthropic = require("@anthropic-ai/sdk");
		client = new Anthropic({ apiKey: "sk-ant-test", baseURL,
		    maxRetries: 0, timeout: 20000, fetch: proxyFetch,
		    defaultHeaders });
		params = Object.assign({ model: "claude-sonnet-4-20250514",
		    max_tokens: 100,
		    messages: [{ role: "user", content: "hi" }] }, extra);
	}
	const api = sdk === "openai" ? client.chat.completions : client.messages;
	try {
		if (call === "stream") {
			const s = await api.create(Object.assign({}, params,
			    { stream: true }));
			for await (const ev of s) {
				out.chunks++;
				if (sdk === "openai") {
					if (ev.usage)
						out.usage_chunks++;
					if (!ev.choices || ev.choices.length === 0) {
						out.empty_choices++;
						continue;
					}
					// what common code does: crashes on choices: []
					out.text += ev.choices[0].delta.content || "";
				} else if (ev.type === "content_block_delta" &&
				    ev.delta.type === "text_delta")
					out.text += ev.delta.text;
			}
		} else {
			const r = await api.create(params);
			out.text = sdk === "openai" ?
			    r.choices[0].message.content : r.content[0].text;
		}
		out.ok = true;
	} catch (e) {
		out.threw = e.constructor ? e.constructor.name : typeof e;
		out.message = String(e.message);
		out.status = e.status === undefined ? null : e.status;
		const body = e.error || {};
		out.error_type = e.type || (body.error && body.error.type) ||
		    body.type || null;
		out.error_code = e.code || null;
		out.request_id = e.headers && typeof e.headers.get === "function" ?
		    e.headers.get("x-airlock-request-id") : null;
	}
}

const timer = setTimeout(() => {
	out.threw = "timeout";
	process.stdout.write(JSON.stringify(out) + "\n");
	process.exit(0);
}, 25000);
main().then(() => {
	clearTimeout(timer);
	process.stdout.write(JSON.stringify(out) + "\n");
	process.exit(0);
});
