/*
 * jscan: pick a few values out of a JSON document without building it.
 *
 * A streaming pass with yajl over a document fed in any split: the caller
 * names the paths it wants ("model", "usage.prompt_tokens", "" for the
 * root value), and each one's type, scalar text (bounded copy) and byte
 * offsets are recorded. Everything else is only lexed: no tree, nesting
 * bounded (JSCAN_DEPTH), and what yajl itself allocates (a token split
 * across feeds, an escaped key) is counted against a fixed budget, beyond
 * which the scan stops with JSCAN_TOO_BIG. Paths do not go through arrays.
 */
#ifndef AIRLOCK_JSCAN_H
#define AIRLOCK_JSCAN_H

#include <stddef.h>
#include <stdint.h>

#define JSCAN_DEPTH	64	/* deeper documents are refused */
#define JSCAN_MAXFIELDS	32
#define JSCAN_MAXLEVEL	5	/* components in a path */
#define JSCAN_TEXT	256	/* bytes of a scalar kept */

enum jscan_type {
	JV_ABSENT = 0,
	JV_NULL,
	JV_BOOL,
	JV_NUMBER,
	JV_STRING,
	JV_OBJECT,
	JV_ARRAY,
};

enum jscan_status {
	JSCAN_OK = 0,		/* a whole document, nothing after it */
	JSCAN_MORE,		/* so far so good: feed on */
	JSCAN_SYNTAX,		/* not JSON, or bytes after it */
	JSCAN_TOO_DEEP,		/* nesting over JSCAN_DEPTH */
	JSCAN_TOO_BIG,		/* the memory budget would be passed */
};

struct jscan_val {
	enum jscan_type	 jv_type;	/* of the last occurrence */
	int		 jv_count;	/* occurrences (duplicate keys) */
	int		 jv_bool;
	char		 jv_text[JSCAN_TEXT];	/* scalar text, cut */
	size_t		 jv_len;	/* its whole length */
	uint64_t	 jv_key_end;	/* offset just after its key */
	uint64_t	 jv_val_end;	/* offset just after its value */
	uint64_t	 jv_members;	/* object: members seen */
};

struct jscan;

/*
 * A scanner for the <n> dotted <paths> (borrowed; they must outlive it).
 * <strict>: strings must be valid UTF-8. <mem_max>: budget in bytes for
 * yajl's own buffers. Results are indexed like <paths>.
 */
/*
 * Also count the bytes (decoded) of every string value, at any depth,
 * whose key is one of <keys> (borrowed): streamed text, for an estimate
 * of the tokens that made it. The count survives jscan_reset().
 */
void		 jscan_count_text(struct jscan *, const char *const *keys,
		    size_t n);
uint64_t	 jscan_text_bytes(const struct jscan *);
struct jscan	*jscan_new(const char *const *paths, size_t n, int strict,
		    size_t mem_max);
/* Start over on a new document (same paths), keeping the allocation. */
void		 jscan_reset(struct jscan *);
enum jscan_status jscan_feed(struct jscan *, const char *, size_t);
/* End of input: JSCAN_OK when one whole document was read. */
enum jscan_status jscan_finish(struct jscan *);
/* 1 once the root value has been read whole. */
int		 jscan_root_done(const struct jscan *);
const struct jscan_val *jscan_get(const struct jscan *, size_t i);
/* A short description of a failure (static). */
const char	*jscan_why(const struct jscan *);
void		 jscan_free(struct jscan *);

/* A JV_NUMBER that is a plain non-negative integer: its value (saturated
 * at UINT64_MAX), else -1. */
int		 jscan_u64(const struct jscan_val *, uint64_t *out);

#endif
