/*
 * The Redis store's server-side scripts (bud_redis.c loads them with
 * SCRIPT LOAD and calls them with EVALSHA). Each runs atomically on the
 * server, so admission across every gateway sees one state: a cap holds
 * exactly, whatever the number of gateways. Time is the server's (TIME):
 * windows (UTC-aligned, as bud_tab.c's), the rate bucket and the leases
 * agree across gateways whatever their clocks say.
 *
 * Keys of a sandbox, all under one hash tag ({S}, S its escaped id):
 *	airlock:{S}:w:WS	hash req, in, out, spend of the window
 *				starting at WS ms (0 = lifetime)
 *	airlock:{S}:res		zset: reservation id -> lease end (ms)
 *	airlock:{S}:ra		hash: reservation id -> µUSD reserved
 *	airlock:{S}:rt		µUSD reserved by the live reservations
 *	airlock:{S}:llm		zset: reservation id -> lease end (ms) of
 *				the metered requests in flight under an
 *				llm_concurrency cap (its slots)
 *	airlock:{S}:rate	hash n, ms, tok, at: the rate bucket
 * A lease that ends (its gateway died, or lost Redis for longer) is
 * released by the next script that touches the sandbox.
 */
#ifndef AIRLOCK_BUD_RSCRIPT_H
#define AIRLOCK_BUD_RSCRIPT_H

/* Shared head: the server's now, the window, expired leases dropped. */
#define BUD_RS_HEAD							\
	"local P = KEYS[1]\n"						\
	"local t = redis.call('TIME')\n"				\
	"local now = tonumber(t[1]) * 1000 + "				\
	"math.floor(tonumber(t[2]) / 1000)\n"				\
	"local win = tonumber(ARGV[1])\n"				\
	"local ws = 0\n"						\
	"if win > 0 then ws = now - (now % win) end\n"			\
	"local W = P .. ':w:' .. ws\n"					\
	"local R, A, T = P .. ':res', P .. ':ra', P .. ':rt'\n"		\
	"local L = P .. ':llm'\n"					\
	"redis.call('ZREMRANGEBYSCORE', L, '-inf', now)\n"		\
	"local old = redis.call('ZRANGEBYSCORE', R, '-inf', now)\n"	\
	"for _, id in ipairs(old) do\n"					\
	"  local a = redis.call('HGET', A, id)\n"			\
	"  if a then redis.call('DECRBY', T, a) end\n"			\
	"  redis.call('HDEL', A, id)\n"					\
	"  redis.call('ZREM', R, id)\n"					\
	"end\n"								\
	"local function touch()\n"					\
	"  if win > 0 then redis.call('PEXPIRE', W, win + 86400000) end\n" \
	"end\n"

/*
 * Admission. ARGV: win_ms, then caps (-1 = none): requests, bytes_in,
 * bytes_out, usd; rate n, rate ms (n -1 = none); reserve, reservation
 * id, lease ms; llm_concurrency (-1 = none: not metered, or no cap).
 * Returns {0, "ok", ws} | {1, CAP, ws} | {2, retry_s, ws} |
 * {3, "llm_concurrency", ws} (every slot taken: live leases in L).
 * Spent caps are judged first so a refused request takes no rate token.
 */
#define BUD_RS_ADMIT BUD_RS_HEAD					\
	"local c = redis.call('HMGET', W, 'req', 'in', 'out', 'spend')\n" \
	"local req, bin = tonumber(c[1]) or 0, tonumber(c[2]) or 0\n"	\
	"local bout, spend = tonumber(c[3]) or 0, tonumber(c[4]) or 0\n" \
	"local rsv = tonumber(redis.call('GET', T)) or 0\n"		\
	"if rsv < 0 then rsv = 0 end\n"					\
	"local reserve = tonumber(ARGV[8])\n"				\
	"local cap = tonumber(ARGV[2])\n"				\
	"if cap >= 0 and req >= cap then return {1, 'requests', ws} end\n" \
	"cap = tonumber(ARGV[3])\n"					\
	"if cap >= 0 and bin >= cap then return {1, 'bytes_in', ws} end\n" \
	"cap = tonumber(ARGV[4])\n"					\
	"if cap >= 0 and bout >= cap then return {1, 'bytes_out', ws} end\n" \
	"cap = tonumber(ARGV[5])\n"					\
	"if cap >= 0 and spend + rsv + reserve > cap then\n"		\
	"  return {1, 'usd', ws}\n"					\
	"end\n"								\
	"local lc = tonumber(ARGV[11]) or -1\n"			\
	"if lc >= 0 and redis.call('ZCARD', L) >= lc then\n"		\
	"  return {3, 'llm_concurrency', ws}\n"				\
	"end\n"								\
	"local n = tonumber(ARGV[6])\n"					\
	"if n >= 0 then\n"						\
	"  local ms = tonumber(ARGV[7])\n"				\
	"  if ms < 1 then ms = 1 end\n"					\
	"  local K = P .. ':rate'\n"					\
	"  local b = redis.call('HMGET', K, 'n', 'ms', 'tok', 'at')\n"	\
	"  local full = n * ms\n"					\
	"  local tok, at = full, now\n"					\
	"  if tonumber(b[1]) == n and tonumber(b[2]) == ms then\n"	\
	"    tok, at = tonumber(b[3]) or full, tonumber(b[4]) or now\n"	\
	"  end\n"							\
	"  local el = now - at\n"					\
	"  if el < 0 then el = 0 end\n"					\
	"  if now > at then at = now end\n"				\
	"  if el >= ms then tok = full else tok = tok + el * n end\n"	\
	"  if tok > full then tok = full end\n"				\
	"  local ok = tok >= ms\n"					\
	"  if ok then tok = tok - ms end\n"				\
	"  redis.call('HSET', K, 'n', n, 'ms', ms, 'tok', tok, 'at', at)\n" \
	"  redis.call('PEXPIRE', K, ms * 2 + 1000)\n"			\
	"  if not ok then\n"						\
	"    local wait = ms\n"						\
	"    if n > 0 then wait = math.ceil((ms - tok) / n) end\n"	\
	"    wait = math.ceil(wait / 1000)\n"				\
	"    if wait < 1 then wait = 1 end\n"				\
	"    return {2, wait, ws}\n"					\
	"  end\n"							\
	"end\n"								\
	"redis.call('HINCRBY', W, 'req', 1)\n"				\
	"touch()\n"							\
	"if reserve > 0 then\n"						\
	"  redis.call('INCRBY', T, ARGV[8])\n"				\
	"  redis.call('HSET', A, ARGV[9], ARGV[8])\n"			\
	"  redis.call('ZADD', R, now + tonumber(ARGV[10]), ARGV[9])\n"	\
	"end\n"								\
	"if lc >= 0 then\n"						\
	"  redis.call('ZADD', L, now + tonumber(ARGV[10]), ARGV[9])\n"	\
	"end\n"								\
	"return {0, 'ok', ws}\n"

/*
 * Settlement (or release, cost 0). ARGV: win_ms, reservation id ("" =
 * none), cost µUSD, bytes in, bytes out. The cost counts even when the
 * lease already ended: what was spent stays spent. Returns 1.
 */
#define BUD_RS_SETTLE BUD_RS_HEAD					\
	"if ARGV[2] ~= '' then\n"					\
	"  local a = redis.call('HGET', A, ARGV[2])\n"			\
	"  if a then redis.call('DECRBY', T, a) end\n"			\
	"  redis.call('HDEL', A, ARGV[2])\n"				\
	"  redis.call('ZREM', R, ARGV[2])\n"				\
	"  redis.call('ZREM', L, ARGV[2])\n"				\
	"end\n"								\
	"if ARGV[3] ~= '0' then redis.call('HINCRBY', W, 'spend', ARGV[3]) end\n" \
	"if ARGV[4] ~= '0' then redis.call('HINCRBY', W, 'in', ARGV[4]) end\n" \
	"if ARGV[5] ~= '0' then redis.call('HINCRBY', W, 'out', ARGV[5]) end\n" \
	"touch()\n"							\
	"return 1\n"

/* Lease renewal of a live reservation (and of its llm_concurrency
 * slot). ARGV: win_ms, id, lease ms. */
#define BUD_RS_RENEW BUD_RS_HEAD					\
	"redis.call('ZADD', R, 'XX', now + tonumber(ARGV[3]), ARGV[2])\n" \
	"redis.call('ZADD', L, 'XX', now + tonumber(ARGV[3]), ARGV[2])\n" \
	"return 1\n"

#endif
