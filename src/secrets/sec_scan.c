/*
 * Reflection guard: a streaming multi-pattern replacer.
 *
 * Semantics are those of the obvious loop: at each position take the
 * longest pattern that starts there, emit its replacement and skip it,
 * else emit the byte and move on (leftmost-longest, non-overlapping,
 * replacements never rescanned). Streaming must not change the result, so
 * the scanner holds back the bytes that could still begin a match.
 *
 * The patterns go into an Aho-Corasick automaton (a trie with failure
 * links; children as sibling lists, since a handful of patterns of a few
 * KiB make a few thousand mostly single-child nodes). Every match ending at
 * each byte is enumerated through the dictionary links (at most one per
 * pattern) and noted, per start position, in a ring the size of the
 * longest pattern: "longest match starting here". A position is decided
 * once no partial match that is still alive (a suffix of the input that
 * can still grow into a pattern: the node's "live") starts at or before
 * it; then the greedy loop above runs over decided positions.
 * Nothing is ever rescanned, so the cost is linear in the input (times
 * the number of patterns ending at a byte), whatever the patterns are.
 * Held bytes are those from the first undecided position: at most the
 * longest pattern - 1, and only what could still begin a match. (A partial
 * match that began inside a replaced one is skipped along the failure
 * chain for up to LIVE_WALK links; past that a few more bytes are held
 * until it dies, within the same bound.)
 *
 * Speed comes from the root state: there the scanner jumps to the next byte
 * that starts some pattern (memchr when there is one such byte, a table
 * otherwise), so ordinary text costs a table look-up per byte. When every
 * pattern is at least TRI_LEN bytes long (the encoded forms and their runs
 * of reflect_min_run bytes cover most of the alphabet, so nearly every byte
 * starts one), it jumps instead to the next position whose first three
 * bytes begin some pattern, found in a hashed bitmap of those trigrams; a
 * partial match shorter than that is dropped there and found again by the
 * jump (no match can end inside it), so the automaton only runs where a
 * pattern may really begin.
 */
#include "config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>

#include "secrets/sec.h"
#include "util/util.h"

#define ROOT		0
/* Bytes copied per step while something is held: bounds the copying. */
#define SCAN_PIECE	16384
/* Failure links followed per byte to release bytes after a replacement. */
#define LIVE_WALK	8
/* Trigram filter: bytes hashed, bits in the bitmap. */
#define TRI_LEN		3
#define TRI_BITS	16

struct scan_node {
	uint32_t	child;		/* first child, 0 = none */
	uint32_t	sibling;	/* next child of the parent, 0 = none */
	uint32_t	fail;
	uint32_t	depth;
	uint32_t	live;		/* deepest node on the failure chain,
					   this one included, with children:
					   the longest partial match alive */
	uint32_t	pat;		/* pattern ending exactly here + 1 */
	uint32_t	out;		/* first such node on the failure chain,
					   the node included; 0 = none */
	uint32_t	dict;		/* the next one after this node */
	uint32_t	dense;		/* index+1 of its child table when it
					   has many children, else 0 */
	unsigned char	byte;
};

/* Children per node above which they get a 256-entry table. */
#define DENSE_MIN	8

struct scan_pat {
	char	*pat;
	size_t	 len;
	char	*repl;
	size_t	 rlen;
};

/* Where a scan stands: the stream's own, or a one-shot string's. */
struct scan_run {
	uint32_t	 state;
	uint64_t	 pos;		/* stream offset of the first held */
	uint32_t	*ring;		/* per offset: longest match starting
					   there (its terminal node), 0 = none;
					   zero outside the held bytes */
	size_t		 rmask;
	size_t		 nmatch;	/* non-zero entries in the ring */
	unsigned char	*w;		/* held bytes at w + woff (stream) */
	size_t		 woff;
	size_t		 wlen;
	size_t		 wcap;
	size_t		 scanned;	/* bytes of w the automaton has seen */
};

/*
 * The patterns and their automaton: built once, then only read, so that
 * scanners made by sec_scan_share() may use it from any thread.
 */
struct scan_dict {
	int			 refs;		/* atomic */
	struct scan_pat		*pats;
	size_t			 npats;
	size_t			 cappats;
	size_t			 maxlen;
	struct scan_node	*nodes;		/* NULL until built */
	size_t			 nnodes;
	uint32_t		 root_next[256];
	unsigned char		 first[256];	/* starts some pattern */
	int			 nfirst;
	unsigned char		 first_byte;	/* when nfirst == 1 */
	size_t			 minlen;	/* shortest pattern */
	uint32_t		*dense;		/* child tables, 256 each */
	size_t			 ndense;
	uint64_t		*tri;		/* trigrams that begin a
						   pattern (hashed), or NULL
						   when one is shorter */
};

struct sec_scan {
	struct scan_dict	*d;
	struct scan_run		 run;
};

/* Output: the stream's evbuffer, or a heap string (sec_scan_string). */
struct sink {
	struct evbuffer	*eb;
	char		*b;
	size_t		 len;
	size_t		 cap;
};

static void
wipe_free(void *p, size_t n)
{
	if (p == NULL)
		return;
	OPENSSL_cleanse(p, n);
	free(p);
}

static void
sink_add(struct sink *sk, const void *p, size_t n)
{
	char	*nb;
	size_t	 ncap;

	if (n == 0)
		return;
	if (sk->eb != NULL) {
		evbuffer_add(sk->eb, p, n);
		return;
	}
	if (sk->len + n + 1 > sk->cap) {
		ncap = sk->cap ? sk->cap : 64;
		while (ncap < sk->len + n + 1)
			ncap *= 2;
		/* the string may carry a secret (placeholder substitution) */
		nb = xmalloc(ncap);
		if (sk->b != NULL) {
			memcpy(nb, sk->b, sk->len);
			wipe_free(sk->b, sk->cap);
		}
		sk->b = nb;
		sk->cap = ncap;
	}
	memcpy(sk->b + sk->len, p, n);
	sk->len += n;
}

/* ---- automaton --------------------------------------------------------- */

static void
nodes_wipe(struct scan_dict *sc)
{
	/* the trie spells the secrets out */
	wipe_free(sc->nodes, sc->nnodes * sizeof(*sc->nodes));
	sc->nodes = NULL;
	sc->nnodes = 0;
	wipe_free(sc->tri, (1 << TRI_BITS) / 8);
	sc->tri = NULL;
	wipe_free(sc->dense, sc->ndense * 256 * sizeof(*sc->dense));
	sc->dense = NULL;
	sc->ndense = 0;
}

static inline uint32_t
tri_hash(const unsigned char *p)
{
	return ((uint32_t)p[0] * 0x9E37u ^ (uint32_t)p[1] * 0x85EBu ^
	    (uint32_t)p[2] * 0x27D5u) & ((1u << TRI_BITS) - 1);
}

static inline int
tri_has(const uint64_t *tri, const unsigned char *p)
{
	uint32_t	h = tri_hash(p);

	return (tri[h >> 6] >> (h & 63)) & 1;
}

static inline uint32_t
go(const struct scan_dict *sc, uint32_t st, unsigned char c)
{
	const struct scan_node	*nodes = sc->nodes;
	uint32_t		 k;

	for (;;) {
		if (st == ROOT)
			return sc->root_next[c];
		if (nodes[st].dense != 0) {
			if ((k = sc->dense[(size_t)(nodes[st].dense - 1) * 256 +
			    c]) != 0)
				return k;
		} else
			for (k = nodes[st].child; k != 0; k = nodes[k].sibling)
				if (nodes[k].byte == c)
					return k;
		st = nodes[st].fail;
	}
}

static void
build(struct scan_dict *sc)
{
	struct scan_node	*n;
	uint32_t		*queue, st, k, f;
	size_t			 total = 1, i, j, qh = 0, qt = 0;
	unsigned char		 c;

	nodes_wipe(sc);
	for (i = 0; i < sc->npats; i++)
		total += sc->pats[i].len;
	sc->nodes = n = xcalloc(total, sizeof(*n));
	sc->nnodes = 1;
	memset(sc->root_next, 0, sizeof(sc->root_next));

	/* trie; root children also in root_next for the fast path */
	for (i = 0; i < sc->npats; i++) {
		st = ROOT;
		for (j = 0; j < sc->pats[i].len; j++) {
			c = (unsigned char)sc->pats[i].pat[j];
			if (st == ROOT)
				k = sc->root_next[c];
			else
				for (k = n[st].child; k != 0 && n[k].byte != c;
				    k = n[k].sibling)
					;
			if (k == 0) {
				k = (uint32_t)sc->nnodes++;
				n[k].byte = c;
				n[k].depth = n[st].depth + 1;
				n[k].sibling = n[st].child;
				n[st].child = k;
				if (st == ROOT)
					sc->root_next[c] = k;
			}
			st = k;
		}
		/* a duplicate pattern keeps the first replacement */
		if (n[st].pat == 0)
			n[st].pat = (uint32_t)i + 1;
	}

	/* busy nodes get a table of their children */
	for (st = 1; st < sc->nnodes; st++) {
		for (j = 0, k = n[st].child; k != 0; k = n[k].sibling)
			j++;
		if (j >= DENSE_MIN)
			n[st].dense = (uint32_t)++sc->ndense;
	}
	if (sc->ndense > 0) {
		sc->dense = xcalloc(sc->ndense * 256, sizeof(*sc->dense));
		for (st = 1; st < sc->nnodes; st++)
			if (n[st].dense != 0)
				for (k = n[st].child; k != 0; k = n[k].sibling)
					sc->dense[(size_t)(n[st].dense - 1) *
					    256 + n[k].byte] = k;
	}

	/* failure links, output links and live, breadth first */
	queue = xcalloc(sc->nnodes, sizeof(*queue));
	n[ROOT].live = 0;
	for (k = n[ROOT].child; k != 0; k = n[k].sibling) {
		n[k].fail = ROOT;
		queue[qt++] = k;
	}
	while (qh < qt) {
		st = queue[qh++];
		f = n[st].fail;
		n[st].dict = n[f].out;
		n[st].out = n[st].pat != 0 ? st : n[st].dict;
		n[st].live = n[st].child != 0 ? st : n[f].live;
		for (k = n[st].child; k != 0; k = n[k].sibling) {
			n[k].fail = go(sc, f, n[k].byte);
			queue[qt++] = k;
		}
	}
	free(queue);

	/* worth it only when many bytes start a pattern (the encoded forms'
	   runs) */
	for (i = 0, k = 0; i < 256; i++)
		k += sc->root_next[i] != 0;
	if (sc->minlen >= TRI_LEN && k > 16) {
		sc->tri = xcalloc((1 << TRI_BITS) / 64, sizeof(uint64_t));
		for (i = 0; i < sc->npats; i++) {
			uint32_t h = tri_hash(
			    (const unsigned char *)sc->pats[i].pat);

			sc->tri[h >> 6] |= (uint64_t)1 << (h & 63);
		}
	}
	memset(sc->first, 0, sizeof(sc->first));
	sc->nfirst = 0;
	for (i = 0; i < 256; i++)
		if (sc->root_next[i] != 0) {
			sc->first[i] = 1;
			sc->first_byte = (unsigned char)i;
			sc->nfirst++;
		}
}

/* ---- scanning ---------------------------------------------------------- */

/* Next index >= i whose byte starts some pattern, or n. */
static inline size_t
skip(const struct scan_dict *sc, const unsigned char *p, size_t i, size_t n)
{
	const unsigned char	*t = sc->first, *q;

	if (sc->tri != NULL) {
		/* no pattern begins where its first three bytes do not */
		while (i + TRI_LEN <= n && !tri_has(sc->tri, p + i))
			i++;
		if (i + TRI_LEN <= n)
			return i;
		/* the last bytes: they may begin a match the next feed ends */
	}
	if (sc->nfirst == 1) {
		q = memchr(p + i, sc->first_byte, n - i);
		return q != NULL ? (size_t)(q - p) : n;
	}
	while (i + 4 <= n) {
		if (t[p[i]])
			return i;
		if (t[p[i + 1]])
			return i + 1;
		if (t[p[i + 2]])
			return i + 2;
		if (t[p[i + 3]])
			return i + 3;
		i += 4;
	}
	while (i < n && !t[p[i]])
		i++;
	return i;
}

/*
 * Offsets before the returned one are decided, at i bytes scanned and g
 * released: what precedes the longest partial match still alive. One that
 * began before g (inside a replaced match) does not count: shorter ones,
 * along the failure chain, are looked for a few steps, else all is held.
 */
static inline size_t
decided(const struct scan_node *nodes, uint32_t st, size_t i, size_t g)
{
	uint32_t	x = nodes[st].live;
	int		k;

	for (k = 0; nodes[x].depth > i - g && k < LIVE_WALK; k++)
		x = nodes[nodes[x].fail].live;
	return nodes[x].depth <= i - g ? i - nodes[x].depth : g;
}

/*
 * Scan buf[i..n) from run state <r>: buf[0] is the first held byte (stream
 * offset r->pos), buf[0..i) has been scanned already. Releases what is
 * decided to <sk> (bytes, or replacements) and returns how many bytes of
 * buf that was; the rest must be handed back, in front of what follows.
 * <final>: nothing follows, decide everything.
 */
static size_t
scan_buf(const struct scan_dict *sc, struct scan_run *r,
    const unsigned char *buf, size_t n, size_t i, int final, struct sink *sk,
    size_t *nrepl)
{
	const struct scan_node	*nodes = sc->nodes;
	const struct scan_pat	*sp;
	uint32_t		*ring = r->ring, *slot, st = r->state, x, d;
	uint64_t		 base = r->pos;
	size_t			 mask = r->rmask, g = 0, e = 0, lim, end;
	size_t			 from = 0;	/* where a jump may start */
	int			 done = 0;

	for (;;) {
		if (i < n) {
			if (st == ROOT ? g == i : (sc->tri != NULL &&
			    nodes[st].depth < TRI_LEN && g >= from &&
			    g == i - nodes[st].depth)) {
				/* nothing pending but a partial match too short
				   to hold a match: jump to where one may begin
				   (the partial, if it is one, is found again;
				   not twice from the same place) */
				st = ROOT;
				if ((i = g = skip(sc, buf, g, n)) == n)
					continue;
				from = i + 1;
			}
			st = go(sc, st, buf[i++]);
			/* every match ending here, longest first */
			for (x = nodes[st].out; x != 0; x = nodes[x].dict) {
				d = nodes[x].depth;
				if (d > i - g)
					continue;	/* starts in the past */
				slot = &ring[(base + i - d) & mask];
				if (*slot == 0) {
					*slot = x;
					r->nmatch++;
				} else if (nodes[*slot].depth < d)
					*slot = x;
			}
			lim = decided(nodes, st, i, g);
		} else if (final) {
			lim = n;
			done = 1;
		} else
			break;
		/* the greedy loop over decided offsets */
		for (;;) {
			while (g < lim) {
				if (r->nmatch == 0) {
					/* no match noted: all plain bytes */
					g = lim;
					break;
				}
				slot = &ring[(base + g) & mask];
				if ((x = *slot) == 0) {
					g++;
					continue;
				}
				sp = &sc->pats[nodes[x].pat - 1];
				sink_add(sk, buf + e, g - e);
				sink_add(sk, sp->repl, sp->rlen);
				(*nrepl)++;
				/* matches starting inside it are void */
				for (end = g + nodes[x].depth; g < end; g++) {
					slot = &ring[(base + g) & mask];
					if (*slot != 0) {
						*slot = 0;
						r->nmatch--;
					}
				}
				e = g;
			}
			/* a replacement past lim may leave partials behind */
			if (done || g == lim)
				break;
			lim = decided(nodes, st, i, g);
			if (lim <= g)
				break;
		}
		if (done)
			break;
	}
	sink_add(sk, buf + e, g - e);
	r->state = final ? ROOT : st;
	r->pos += g;
	return g;
}

/*
 * Room for <need> more bytes after the held ones. Released bytes are only
 * skipped (woff) and the rest moved down when the end is reached, so slow
 * feeds behind a long held tail do not move it for every byte.
 */
static void
run_reserve(struct scan_run *r, size_t need)
{
	unsigned char	*nw;
	size_t		 ncap;

	if (r->woff + r->wlen + need <= r->wcap)
		return;
	if (r->wlen + need <= r->wcap / 2) {
		memmove(r->w, r->w + r->woff, r->wlen);
		OPENSSL_cleanse(r->w + r->wlen, r->woff);
		r->woff = 0;
		return;
	}
	ncap = r->wcap ? r->wcap : 256;
	while (ncap < 2 * (r->wlen + need))
		ncap *= 2;
	nw = xmalloc(ncap);
	if (r->w != NULL) {
		memcpy(nw, r->w + r->woff, r->wlen);
		wipe_free(r->w, r->wcap);
	}
	r->w = nw;
	r->wcap = ncap;
	r->woff = 0;
}

/* Drop the first <rel> held bytes, wiping them. */
static void
run_release(struct scan_run *r, size_t rel)
{
	OPENSSL_cleanse(r->w + r->woff, rel);
	r->woff += rel;
	r->wlen -= rel;
	if (r->wlen == 0)
		r->woff = 0;
}

static void
run_reset(struct scan_run *r)
{
	if (r->w != NULL)
		OPENSSL_cleanse(r->w, r->wcap);
	r->woff = 0;
	r->wlen = 0;
	r->scanned = 0;
	r->state = ROOT;
	r->pos = 0;
}

/* A ring covering the longest pattern (a power of two, for masking). */
static void
run_ring(const struct scan_dict *sc, struct scan_run *r)
{
	size_t	sz = 16;

	while (sz < sc->maxlen)
		sz *= 2;
	free(r->ring);
	r->ring = xcalloc(sz, sizeof(*r->ring));
	r->rmask = sz - 1;
	r->nmatch = 0;
}

static void
ensure_built(struct sec_scan *sc)
{
	if (sc->d->nodes != NULL)
		return;
	build(sc->d);
	run_ring(sc->d, &sc->run);
	/* held bytes are rescanned under the new automaton */
	sc->run.state = ROOT;
	sc->run.scanned = 0;
}

static void
dict_unref(struct scan_dict *d)
{
	size_t	i;

	if (d == NULL || __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	for (i = 0; i < d->npats; i++) {
		wipe_free(d->pats[i].pat, d->pats[i].len);
		wipe_free(d->pats[i].repl, d->pats[i].rlen);
	}
	free(d->pats);
	nodes_wipe(d);
	OPENSSL_cleanse(d, sizeof(*d));
	free(d);
}

/* A dictionary of our own, with the patterns of the shared one. */
static void
dict_unshare(struct sec_scan *sc)
{
	struct scan_dict	*old = sc->d, *d;
	size_t			 i;

	d = xcalloc(1, sizeof(*d));
	d->refs = 1;
	d->pats = xcalloc(old->npats ? old->npats : 1, sizeof(*d->pats));
	d->cappats = old->npats;
	d->npats = old->npats;
	d->maxlen = old->maxlen;
	d->minlen = old->minlen;
	for (i = 0; i < old->npats; i++) {
		d->pats[i].pat = xmalloc(old->pats[i].len);
		memcpy(d->pats[i].pat, old->pats[i].pat, old->pats[i].len);
		d->pats[i].len = old->pats[i].len;
		d->pats[i].repl = xmalloc(old->pats[i].rlen ?
		    old->pats[i].rlen : 1);
		memcpy(d->pats[i].repl, old->pats[i].repl, old->pats[i].rlen);
		d->pats[i].rlen = old->pats[i].rlen;
	}
	sc->d = d;
	dict_unref(old);
}

/* ---- API ----------------------------------------------------------------- */

struct sec_scan *
sec_scan_new(void)
{
	struct sec_scan	*sc = xcalloc(1, sizeof(*sc));

	sc->d = xcalloc(1, sizeof(*sc->d));
	sc->d->refs = 1;
	return sc;
}

struct sec_scan *
sec_scan_share(struct sec_scan *sc)
{
	struct sec_scan	*n = xcalloc(1, sizeof(*n));

	/* built before it is shared: readers never write it */
	if (sc->d->npats > 0)
		ensure_built(sc);
	__atomic_add_fetch(&sc->d->refs, 1, __ATOMIC_ACQ_REL);
	n->d = sc->d;
	if (n->d->nodes != NULL)
		run_ring(n->d, &n->run);
	return n;
}

void
sec_scan_add(struct sec_scan *sc, const char *pat, size_t patlen,
    const char *repl, size_t repllen)
{
	struct scan_dict	*d;
	struct scan_pat		*p;

	/* an empty pattern would match everywhere */
	if (patlen == 0 || patlen >= UINT32_MAX / 2)
		return;
	if (__atomic_load_n(&sc->d->refs, __ATOMIC_ACQUIRE) > 1)
		dict_unshare(sc);	/* others read it: copy on write */
	d = sc->d;
	if (d->npats == d->cappats) {
		d->cappats = d->cappats ? d->cappats * 2 : 4;
		d->pats = xrealloc(d->pats, d->cappats * sizeof(*d->pats));
	}
	p = &d->pats[d->npats++];
	p->pat = xmalloc(patlen);
	memcpy(p->pat, pat, patlen);
	p->len = patlen;
	p->repl = xmalloc(repllen);
	if (repllen > 0)
		memcpy(p->repl, repl, repllen);
	p->rlen = repllen;
	if (patlen > d->maxlen)
		d->maxlen = patlen;
	if (d->npats == 1 || patlen < d->minlen)
		d->minlen = patlen;
	/* rebuilt at the next use */
	nodes_wipe(d);
}

size_t
sec_scan_npatterns(const struct sec_scan *sc)
{
	return sc->d->npats;
}

size_t
sec_scan_feed(struct sec_scan *sc, const char *data, size_t len,
    struct evbuffer *out)
{
	struct scan_run		*r = &sc->run;
	struct sink		 sk = { out, NULL, 0, 0 };
	const unsigned char	*p = (const unsigned char *)data;
	size_t			 nrepl = 0, rel, piece;

	if (sc->d->npats == 0) {
		evbuffer_add(out, data, len);
		return 0;
	}
	ensure_built(sc);
	while (len > 0) {
		if (r->wlen == 0) {
			/* nothing held: scan the caller's bytes in place */
			r->state = ROOT;
			rel = scan_buf(sc->d, r, p, len, 0, 0, &sk, &nrepl);
			if (rel < len) {
				run_reserve(r, len - rel);
				memcpy(r->w + r->woff, p + rel, len - rel);
			}
			r->wlen = r->scanned = len - rel;
			break;
		}
		/* continue behind the held bytes, a piece at a time */
		piece = SCAN_PIECE > sc->d->maxlen ? SCAN_PIECE : sc->d->maxlen;
		if (piece > len)
			piece = len;
		run_reserve(r, piece);
		memcpy(r->w + r->woff + r->wlen, p, piece);
		r->wlen += piece;
		p += piece;
		len -= piece;
		rel = scan_buf(sc->d, r, r->w + r->woff, r->wlen, r->scanned, 0,
		    &sk, &nrepl);
		run_release(r, rel);
		r->scanned = r->wlen;
	}
	return nrepl;
}

size_t
sec_scan_finish(struct sec_scan *sc, struct evbuffer *out)
{
	struct scan_run	*r = &sc->run;
	struct sink	 sk = { out, NULL, 0, 0 };
	size_t		 nrepl = 0;

	if (sc->d->npats > 0 && r->wlen > 0) {
		ensure_built(sc);
		(void)scan_buf(sc->d, r, r->w + r->woff, r->wlen, r->scanned,
		    1, &sk, &nrepl);
	}
	run_reset(r);
	return nrepl;
}

char *
sec_scan_string(struct sec_scan *sc, const char *s, size_t len,
    size_t *outlen, size_t *nrepl)
{
	struct scan_run	 r;
	struct sink	 sk = { NULL, NULL, 0, 0 };
	size_t		 n = 0;

	/* a run of its own: the stream's state is left alone */
	memset(&r, 0, sizeof(r));
	if (sc->d->npats > 0) {
		ensure_built(sc);
		run_ring(sc->d, &r);
		(void)scan_buf(sc->d, &r, (const unsigned char *)s, len, 0, 1,
		    &sk, &n);
		free(r.ring);
	} else
		sink_add(&sk, s, len);
	if (sk.b == NULL) {
		sk.b = xmalloc(1);
		sk.cap = 1;
	}
	sk.b[sk.len] = '\0';
	if (outlen != NULL)
		*outlen = sk.len;
	if (nrepl != NULL)
		*nrepl = n;
	return sk.b;
}

void
sec_scan_free(struct sec_scan *sc)
{
	if (sc == NULL)
		return;
	dict_unref(sc->d);
	free(sc->run.ring);
	wipe_free(sc->run.w, sc->run.wcap);
	OPENSSL_cleanse(sc, sizeof(*sc));
	free(sc);
}
