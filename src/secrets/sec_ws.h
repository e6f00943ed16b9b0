/*
 * WebSocket frames after a 101 (sec_ws.c): one direction of one
 * upgraded connection, parsed and written again with wslay's frame codec.
 * Towards the upstream (masked frames): text messages get the bound
 * secrets' placeholders replaced, every message and control frame is
 * watched for placeholders that may not go there (the tripwire). Towards
 * the client: every data message and control payload through the
 * reflection guard. Messages stream: each piece of a frame goes out as a
 * fragment of its own once the scanners have let it go, so nothing holds
 * more than a lookbehind and a control frame (125 bytes).
 */
#ifndef AIRLOCK_SEC_WS_H
#define AIRLOCK_SEC_WS_H

#include <stddef.h>
#include <stdint.h>

#include "pipe/stage.h"

struct cfg;
struct cfg_secret;
struct evbuffer;
struct sec_body;
struct sec_req;
struct sec_scan;
struct sec_trip;
struct sec_ws;

enum sec_ws_res {
	SEC_WS_OK = 0,
	SEC_WS_MISUSE,		/* a placeholder that may not go there */
	SEC_WS_BAD,		/* not RFC 6455 (or an extension's bits) */
};

/* <up>: client to server frames (masked, and masked again). */
struct sec_ws	*sec_ws_new(int up);
/* Text messages: placeholders replaced by <sb> (owned). */
void		 sec_ws_set_subst(struct sec_ws *, struct sec_body *sb);
/* Placeholders that end the connection, in data messages and in
 * control payloads (two streams: owned). */
void		 sec_ws_set_trip(struct sec_ws *, struct sec_trip *data,
		    struct sec_trip *ctl);
/* Redacted from data messages and control payloads (borrowed). */
void		 sec_ws_set_reflect(struct sec_ws *, struct sec_scan *);
/* Frames in, frames out (to <out>); after an error nothing more goes. */
enum sec_ws_res	 sec_ws_feed(struct sec_ws *, const char *, size_t,
		    struct evbuffer *out);
/* Its substitution, for the audit (sec_body_count / sec_body_hits). */
const struct sec_body *sec_ws_subst(const struct sec_ws *);
void		 sec_ws_free(struct sec_ws *);

/* A close frame with <code> and <reason>, masked when <masked>. */
void		 sec_ws_close_frame(int masked, uint16_t code,
		    const char *reason, struct evbuffer *out);

/* May secret <s>'s placeholder be replaced in frames over this
 * transport (placeholder_in: [..., ws])? */
int		 sec_ws_allowed(const struct cfg_secret *, int tls);
/* Does <cfg> have a placeholder that frames must be watched for? */
int		 sec_ws_watch(const struct cfg *);
/* The substitution for frames towards <host>, or NULL (values held in
 * *srp, made when needed). */
struct sec_body	*sec_ws_subst_new(struct sec_req **srp, const struct cfg *,
		    const char *host, int tls);
/* The placeholders frames towards <host> must not carry, or NULL. */
struct sec_trip	*sec_ws_trip_new(const struct cfg *, const char *host,
		    int tls);

/* The secrets stage's hooks for the bytes after a 101 (sec_ws_stage.c). */
int		 sec_ws_req_drop(struct xs_call *, const char *, size_t);
enum xs_verdict	 sec_ws_req_body(struct xs_call *, const char *, size_t);
enum xs_verdict	 sec_ws_resp_body(struct xs_call *, struct evbuffer *in,
		    struct evbuffer *out);

#endif
