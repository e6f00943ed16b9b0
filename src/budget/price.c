/*
 * Pricing: token usage -> integer micro-dollars. Pure; no locks, no
 * allocation. Prices are µUSD per million tokens, so a cost is the sum of
 * tokens x price over 10^6, rounded up: the products are formed in 128
 * bits, which holds 2^40 tokens at any 64-bit price without overflow.
 */
#include "config.h"

#include <stdint.h>
#include <string.h>

#include "budget/bud.h"
#include "cfg/cfg.h"
#include "policy/pol.h"

__extension__ typedef unsigned __int128 u128;

#define PRICE_UNIT	1000000ULL	/* prices are per million tokens */

/* First entry whose glob matches <model>; NULL for none (or no model). */
static const struct cfg_price *
price_find(const struct cfg *c, const char *model)
{
	size_t	i;

	if (c == NULL || model == NULL || model[0] == '\0')
		return NULL;
	for (i = 0; i < c->c_npricing; i++)
		if (pol_glob_match(c->c_pricing[i].pr_model, model))
			return &c->c_pricing[i];
	return NULL;
}

/*
 * An unpriced model is charged the highest price of each kind in the
 * table, so not knowing a model never makes it cheaper than any model we
 * do know. An empty table prices everything at 0.
 */
static void
price_highest(const struct cfg *c, struct cfg_price *out)
{
	const struct cfg_price	*p;
	size_t			 i;

	memset(out, 0, sizeof(*out));
	if (c == NULL)
		return;
	for (i = 0; i < c->c_npricing; i++) {
		p = &c->c_pricing[i];
		if (p->pr_input > out->pr_input)
			out->pr_input = p->pr_input;
		if (p->pr_output > out->pr_output)
			out->pr_output = p->pr_output;
		if (p->pr_cached_input > out->pr_cached_input)
			out->pr_cached_input = p->pr_cached_input;
		if (p->pr_cache_write > out->pr_cache_write)
			out->pr_cache_write = p->pr_cache_write;
	}
}

/* Prices for <model>: the matching entry's or the highest; *unpriced. */
static void
price_lookup(const struct cfg *c, const char *model, struct cfg_price *out,
    int *unpriced)
{
	const struct cfg_price	*p;

	if ((p = price_find(c, model)) != NULL) {
		*out = *p;
		*unpriced = 0;
	} else {
		price_highest(c, out);
		*unpriced = 1;
	}
}

/* a + b, saturating: only absurd token counts (near 2^64) get there. */
static u128
price_add(u128 a, u128 b)
{
	return a + b < a ? ~(u128)0 : a + b;
}

/* ceil(sum / 10^6), saturating at UINT64_MAX. */
static uint64_t
price_round(u128 sum)
{
	u128	q;

	q = sum / PRICE_UNIT + (sum % PRICE_UNIT != 0);
	return q > UINT64_MAX ? UINT64_MAX : (uint64_t)q;
}

uint64_t
price_usage(const struct cfg *c, const struct usage *u, int *unpriced)
{
	struct cfg_price	pr;
	uint64_t		uncached;
	u128			sum;
	int			dummy;

	if (unpriced == NULL)
		unpriced = &dummy;
	price_lookup(c, u->u_model, &pr, unpriced);

	/*
	 * u_input counts every prompt token; cache reads and writes are
	 * priced on their own, the rest at `input`. Subtract step by step so
	 * that inconsistent reports clamp at 0 instead of wrapping.
	 */
	uncached = u->u_input;
	uncached = uncached > u->u_cached ? uncached - u->u_cached : 0;
	uncached = uncached > u->u_cache_write ? uncached - u->u_cache_write :
	    0;

	/* Each product of two 64-bit numbers fits in 128 bits. */
	sum = (u128)uncached * pr.pr_input;
	sum = price_add(sum, (u128)u->u_cached * pr.pr_cached_input);
	sum = price_add(sum, (u128)u->u_cache_write * pr.pr_cache_write);
	sum = price_add(sum, (u128)u->u_output * pr.pr_output);
	return price_round(sum);
}

uint64_t
price_worst(const struct cfg *c, const char *model, uint64_t input_est,
    uint64_t max_output)
{
	struct cfg_price	pr;
	int			unpriced;

	/*
	 * Prompt tokens at the plain input price: the caller's estimate
	 * (body bytes) already overstates the token count several times.
	 */
	price_lookup(c, model, &pr, &unpriced);
	return price_round(price_add((u128)input_est * pr.pr_input,
	    (u128)max_output * pr.pr_output));
}

uint64_t
price_max_output(const struct cfg *c, const char *model)
{
	const struct cfg_price	*p;
	uint64_t		 dflt, m, best;
	size_t			 i;

	if (c == NULL)
		return 0;
	dflt = c->c_limits.l_default_max_tokens;
	if ((p = price_find(c, model)) != NULL)
		return p->pr_max_output != 0 ? p->pr_max_output : dflt;
	/* unknown model: nothing we price may produce more */
	best = dflt;
	for (i = 0; i < c->c_npricing; i++) {
		m = c->c_pricing[i].pr_max_output;
		if (m > best)
			best = m;
	}
	return best;
}
