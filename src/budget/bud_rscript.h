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
 *	airlock:{S}:gi, :go	hash: reservation id -> bytes in / out
 *				granted to its exchange, not yet settled
 *	airlock:{S}:gti, :gto	the bytes granted by all of them
 *	airlock:{S}:gl		zset: reservation id -> lease end (ms) of
 *				its grants
 * A lease that ends (its gateway died, or lost Redis for longer) is
 * released by the next script that touches the sandbox; a byte grant
 * whose lease ends counts as moved (added to the window's in / out):
 * its bytes may have gone, and a cap must not be passed twice.
 *
 * Byte grants: with a bytes cap the room of the window is cap - settled
 * - granted. An exchange moves bytes only within what it was granted
 * (in chunks, bud_grant.c); its settlement adds what it moved and
 * releases the rest, so the bytes caps hold across the fleet.
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
	"local GI, GO, GL = P .. ':gi', P .. ':go', P .. ':gl'\n"	\
	"local GTI, GTO = P .. ':gti', P .. ':gto'\n"			\
	"local function touch()\n"					\
	"  if win > 0 then redis.call('PEXPIRE', W, win + 86400000) end\n" \
	"end\n"								\
	"redis.call('ZREMRANGEBYSCORE', L, '-inf', now)\n"		\
	"local old = redis.call('ZRANGEBYSCORE', R, '-inf', now)\n"	\
	"for _, id in ipairs(old) do\n"					\
	"  local a = redis.call('HGET', A, id)\n"			\
	"  if a then redis.call('DECRBY', T, a) end\n"			\
	"  redis.call('HDEL', A, id)\n"					\
	"  redis.call('ZREM', R, id)\n"					\
	"end\n"								\
	"local function lapse(H, TT, f, id)\n"				\
	"  local a = redis.call('HGET', H, id)\n"			\
	"  if a then\n"							\
	"    redis.call('DECRBY', TT, a)\n"				\
	"    redis.call('HINCRBY', W, f, a)\n"				\
	"    redis.call('HDEL', H, id)\n"					\
	"  end\n"							\
	"end\n"								\
	"local gx = redis.call('ZRANGEBYSCORE', GL, '-inf', now)\n"	\
	"for _, id in ipairs(gx) do\n"					\
	"  lapse(GI, GTI, 'in', id)\n"					\
	"  lapse(GO, GTO, 'out', id)\n"					\
	"  redis.call('ZREM', GL, id)\n"					\
	"end\n"								\
	"if #gx > 0 then touch() end\n"					\
	"local function granted(TT)\n"					\
	"  local g = tonumber(redis.call('GET', TT)) or 0\n"		\
	"  if g < 0 then g = 0 end\n"					\
	"  return g\n"							\
	"end\n"								\
	"local function give(H, TT, f, cap, want, id)\n"			\
	"  if cap < 0 then return 0, -1 end\n"				\
	"  local used = tonumber(redis.call('HGET', W, f)) or 0\n"	\
	"  local left = cap - used - granted(TT)\n"			\
	"  if left < 0 then left = 0 end\n"				\
	"  local g = want\n"						\
	"  if g > left then g = left end\n"				\
	"  if g > 0 then\n"						\
	"    redis.call('HINCRBY', H, id, g)\n"				\
	"    redis.call('INCRBY', TT, g)\n"				\
	"  end\n"							\
	"  return g, left - g\n"						\
	"end\n"								\
	"local function grant(id, ci, co, wi, wo, lease)\n"		\
	"  local gi, li = give(GI, GTI, 'in', ci, wi, id)\n"		\
	"  local go, lo = give(GO, GTO, 'out', co, wo, id)\n"		\
	"  if gi > 0 or go > 0 then\n"					\
	"    redis.call('ZADD', GL, now + lease, id)\n"			\
	"  end\n"							\
	"  return {gi, go, li, lo}\n"					\
	"end\n"

/*
 * Admission. ARGV: win_ms, then caps (-1 = none): requests, bytes_in,
 * bytes_out, usd; rate n, rate ms (n -1 = none); reserve, reservation
 * id, lease ms; llm_concurrency (-1 = none: not metered, or no cap);
 * bytes in and out wanted as the exchange's first grant (0 = none), the
 * room a bytes cap must have left to admit (min'ed with the cap; 0: 1).
 * Returns {0, "ok", ws} | {0, "ok", ws, in, out, left_in, left_out}
 * (a first grant was wanted: what it got, what the window has left,
 * -1 = no cap) | {1, CAP, ws} | {2, retry_s, ws} |
 * {3, "llm_concurrency", ws} (every slot taken: live leases in L).
 * Spent caps are judged first so a refused request takes no rate token;
 * a bytes cap is spent when the settled and granted bytes leave less
 * than that room of it.
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
	"local mg = tonumber(ARGV[14]) or 0\n"				\
	"local function spent(cap, used, TT)\n"				\
	"  if cap < 0 then return false end\n"				\
	"  local need = math.max(1, math.min(mg, cap))\n"		\
	"  return cap - used - granted(TT) < need\n"			\
	"end\n"								\
	"if spent(cap, bin, GTI) then return {1, 'bytes_in', ws} end\n"	\
	"if spent(tonumber(ARGV[4]), bout, GTO) then\n"			\
	"  return {1, 'bytes_out', ws}\n"				\
	"end\n"								\
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
	"local wi, wo = tonumber(ARGV[12]) or 0, tonumber(ARGV[13]) or 0\n" \
	"if wi > 0 or wo > 0 then\n"					\
	"  local g = grant(ARGV[9], tonumber(ARGV[3]), tonumber(ARGV[4]),\n" \
	"      wi, wo, tonumber(ARGV[10]))\n"				\
	"  return {0, 'ok', ws, g[1], g[2], g[3], g[4]}\n"		\
	"end\n"								\
	"return {0, 'ok', ws}\n"

/*
 * Settlement (or release, cost 0). ARGV: win_ms, reservation id ("" =
 * none), cost µUSD, bytes in, bytes out, grants (1: bytes in were
 * granted, 2: bytes out, 3: both). The cost counts even when the lease
 * already ended: what was spent stays spent. The exchange's grants are
 * released; bytes of a direction that was granted and whose grant is
 * gone (its lease ended: counted in full then) are not added again.
 * Returns 1.
 */
#define BUD_RS_SETTLE BUD_RS_HEAD					\
	"local gf = tonumber(ARGV[6]) or 0\n"				\
	"local hi, ho = true, true\n"					\
	"local function drop(H, TT, id)\n"				\
	"  local a = redis.call('HGET', H, id)\n"			\
	"  if not a then return false end\n"				\
	"  redis.call('DECRBY', TT, a)\n"				\
	"  redis.call('HDEL', H, id)\n"					\
	"  return true\n"						\
	"end\n"								\
	"if ARGV[2] ~= '' then\n"					\
	"  local a = redis.call('HGET', A, ARGV[2])\n"			\
	"  if a then redis.call('DECRBY', T, a) end\n"			\
	"  redis.call('HDEL', A, ARGV[2])\n"				\
	"  redis.call('ZREM', R, ARGV[2])\n"				\
	"  redis.call('ZREM', L, ARGV[2])\n"				\
	"  if not drop(GI, GTI, ARGV[2]) and gf % 2 == 1 then hi = false end\n" \
	"  if not drop(GO, GTO, ARGV[2]) and gf >= 2 then ho = false end\n" \
	"  redis.call('ZREM', GL, ARGV[2])\n"				\
	"end\n"								\
	"if ARGV[3] ~= '0' then redis.call('HINCRBY', W, 'spend', ARGV[3]) end\n" \
	"if ARGV[4] ~= '0' and hi then redis.call('HINCRBY', W, 'in', ARGV[4]) end\n" \
	"if ARGV[5] ~= '0' and ho then redis.call('HINCRBY', W, 'out', ARGV[5]) end\n" \
	"touch()\n"							\
	"return 1\n"

/* Lease renewal of a live reservation (and of its llm_concurrency
 * slot and byte grants). ARGV: win_ms, id, lease ms. */
#define BUD_RS_RENEW BUD_RS_HEAD					\
	"redis.call('ZADD', R, 'XX', now + tonumber(ARGV[3]), ARGV[2])\n" \
	"redis.call('ZADD', L, 'XX', now + tonumber(ARGV[3]), ARGV[2])\n" \
	"redis.call('ZADD', GL, 'XX', now + tonumber(ARGV[3]), ARGV[2])\n" \
	"return 1\n"

/*
 * The next byte grant of a live exchange. ARGV: win_ms, reservation id,
 * caps bytes_in, bytes_out (-1 = none), bytes in and out wanted, lease
 * ms. Each is min(wanted, cap - settled - granted); 0 when the window
 * has no room left. Returns {in, out, left_in, left_out} (left: what
 * the window has left after it, -1 = no cap).
 */
#define BUD_RS_GRANT BUD_RS_HEAD					\
	"return grant(ARGV[2], tonumber(ARGV[3]), tonumber(ARGV[4]),\n"	\
	"    tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7]))\n"

#endif
