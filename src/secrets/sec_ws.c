/*
 * WebSocket frames after a 101 towards a host (sec_ws.h). wslay's frame
 * codec reads the frames (RFC 6455 framing, 16/64-bit lengths, unmasking;
 * it rejects control frames over 125 bytes or fragmented) and writes them
 * again (masked with a fresh key towards the upstream). We keep the
 * message state: fragments in order, control frames between them, no
 * reserved bits (Sec-WebSocket-Extensions was not let through, so no
 * permessage-deflate: a compressed payload could not be scanned).
 *
 * A data message is changed as it streams: each piece wslay hands us goes
 * through the tripwire's hold, the substitution (text messages) or the
 * reflection guard, and what they let go leaves as a fragment of its
 * own; the message's last frame flushes them. A message is never held
 * whole, whatever its frames' lengths: an intermediary may fragment a
 * message again when no extension was negotiated (RFC 6455 5.4). Control
 * frames are at most 125 bytes and are held whole, then sent (redacted
 * towards the client: a close reason or a pong could echo a secret).
 */
#include "config.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <wslay/wslay.h>

#include "cfg/cfg.h"
#include "secrets/sec.h"
#include "secrets/sec_inject.h"
#include "secrets/sec_req.h"
#include "secrets/sec_ws.h"
#include "util/log.h"
#include "util/util.h"

#define WS_CTL_MAX	125

struct sec_ws {
	wslay_frame_context_ptr	 w_ctx;
	int			 w_up;		/* masked both ways */
	int			 w_dead;	/* an error: nothing more */
	/* input wslay reads from (the current feed) */
	const char		*w_in;
	size_t			 w_inlen;
	struct evbuffer		*w_out;		/* where frames go */
	/* the frame being read */
	int			 w_in_frame;
	uint8_t			 w_op;
	uint8_t			 w_fin;
	uint64_t		 w_len;
	uint64_t		 w_off;
	/* the data message being read: its opcode, 0 between messages */
	uint8_t			 w_msg_op;
	int			 w_msg_sent;	/* a fragment of it went */
	/* a control frame, held whole */
	uint8_t			 w_ctl[WS_CTL_MAX];
	size_t			 w_nctl;
	struct sec_body		*w_subst;
	struct sec_trip		*w_trip;
	struct sec_trip		*w_trip_ctl;
	struct sec_scan		*w_reflect;
	struct evbuffer		*w_tmp[2];
};

static ssize_t
ws_recv(uint8_t *buf, size_t len, int flags,
    void *arg)
{
	struct sec_ws	*w = arg;
	size_t		 n = len < w->w_inlen ? len : w->w_inlen;

	(void)flags;
	if (n == 0)
		return 0;	/* wslay: WSLAY_ERR_WANT_READ */
	memcpy(buf, w->w_in, n);
	w->w_in += n;
	w->w_inlen -= n;
	return (ssize_t)n;
}

static ssize_t
ws_send(const uint8_t *data, size_t len,
    int flags, void *arg)
{
	struct sec_ws	*w = arg;

	(void)flags;
	evbuffer_add(w->w_out, data, len);
	return (ssize_t)len;
}

static int
ws_genmask(uint8_t *buf, size_t len, void *arg)
{
	(void)arg;
	return RAND_bytes(buf, (int)len) == 1 ? 0 : -1;
}

static const struct wslay_frame_callbacks ws_cbs = {
	ws_send, ws_recv, ws_genmask,
};

struct sec_ws *
sec_ws_new(int up)
{
	struct sec_ws	*w = xcalloc(1, sizeof(*w));

	if (wslay_frame_context_init(&w->w_ctx, &ws_cbs, w) != 0)
		fatal("wslay_frame_context_init");
	w->w_up = up;
	w->w_tmp[0] = evbuffer_new();
	w->w_tmp[1] = evbuffer_new();
	return w;
}

void
sec_ws_set_subst(struct sec_ws *w, struct sec_body *sb)
{
	sec_body_free(w->w_subst);
	w->w_subst = sb;
}

void
sec_ws_set_trip(struct sec_ws *w, struct sec_trip *data,
    struct sec_trip *ctl)
{
	sec_trip_free(w->w_trip);
	sec_trip_free(w->w_trip_ctl);
	w->w_trip = data;
	w->w_trip_ctl = ctl;
}

void
sec_ws_set_reflect(struct sec_ws *w, struct sec_scan *sc)
{
	w->w_reflect = sc;
}

const struct sec_body *
sec_ws_subst(const struct sec_ws *w)
{
	return w != NULL ? w->w_subst : NULL;
}

static void
drain_wipe(struct evbuffer *b)
{
	size_t	n = evbuffer_get_length(b);

	if (n == 0)
		return;
	OPENSSL_cleanse(evbuffer_pullup(b, (ssize_t)n), n);
	evbuffer_drain(b, n);
}

void
sec_ws_free(struct sec_ws *w)
{
	if (w == NULL)
		return;
	wslay_frame_context_free(w->w_ctx);
	sec_body_free(w->w_subst);
	sec_trip_free(w->w_trip);
	sec_trip_free(w->w_trip_ctl);
	drain_wipe(w->w_tmp[0]);
	drain_wipe(w->w_tmp[1]);
	evbuffer_free(w->w_tmp[0]);
	evbuffer_free(w->w_tmp[1]);
	OPENSSL_cleanse(w->w_ctl, sizeof(w->w_ctl));
	free(w);
}

/* One frame out whole (our send callback takes everything). */
static void
emit(struct sec_ws *w, uint8_t op, int fin, const uint8_t *p, size_t n)
{
	struct wslay_frame_iocb	io;
	ssize_t			r;

	memset(&io, 0, sizeof(io));
	io.fin = (uint8_t)(fin != 0);
	io.opcode = op;
	io.mask = (uint8_t)w->w_up;
	io.payload_length = n;
	io.data = p;
	io.data_length = n;
	do {
		r = wslay_frame_send(w->w_ctx, &io);
		if (r < 0)
			fatal("wslay_frame_send: %zd", r);
		io.data += r;
		io.data_length -= (size_t)r;
	} while (io.data_length > 0);
}

/* What the scanners let go of the message, as its next fragment. */
static void
emit_piece(struct sec_ws *w, struct evbuffer *b, int fin)
{
	size_t	n = evbuffer_get_length(b);
	uint8_t	*p;

	if (n == 0 && !fin)
		return;
	p = n > 0 ? evbuffer_pullup(b, (ssize_t)n) : (uint8_t *)"";
	emit(w, w->w_msg_sent ? WSLAY_CONTINUATION_FRAME : w->w_msg_op, fin,
	    p, n);
	w->w_msg_sent = 1;
	drain_wipe(b);
}

/* A piece of a data message; <end>: the message's last. */
static enum sec_ws_res
data_piece(struct sec_ws *w, const uint8_t *p, size_t n, int end)
{
	struct evbuffer	*a = w->w_tmp[0], *b = w->w_tmp[1];
	const char	*q = (const char *)p;
	size_t		 len = n;

	if (w->w_trip != NULL) {
		if (sec_trip_feed(w->w_trip, q, len, b))
			return SEC_WS_MISUSE;
		/* nothing of a placeholder leaves before it is seen whole */
		len = sec_trip_hold(w->w_trip, q, len, end, a);
		q = len > 0 ? (const char *)evbuffer_pullup(a, (ssize_t)len) :
		    "";
	}
	if (w->w_subst != NULL && w->w_msg_op == WSLAY_TEXT_FRAME)
		sec_body_feed(w->w_subst, q, len, end, b);
	else if (w->w_reflect != NULL) {
		if (len > 0)
			sec_scan_feed(w->w_reflect, q, len, b);
		if (end)
			sec_scan_finish(w->w_reflect, b);
	} else
		evbuffer_add(b, q, len);
	drain_wipe(a);
	emit_piece(w, b, end);
	return SEC_WS_OK;
}

/* A control frame read whole: watched or redacted, then sent. */
static enum sec_ws_res
ctl_done(struct sec_ws *w)
{
	struct evbuffer	*b = w->w_tmp[1];
	char		*clean;
	size_t		 n = w->w_nctl, clen, keep;

	if (w->w_trip_ctl != NULL && n > 0 && sec_trip_feed(w->w_trip_ctl,
	    (const char *)w->w_ctl, n, b))
		return SEC_WS_MISUSE;
	evbuffer_drain(b, evbuffer_get_length(b));
	if (w->w_reflect != NULL && n > 0) {
		/* a close keeps its code; the reason is cut to fit */
		keep = w->w_op == WSLAY_CONNECTION_CLOSE && n >= 2 ? 2 : 0;
		clean = sec_scan_string(w->w_reflect, (const char *)w->w_ctl +
		    keep, n - keep, &clen, NULL);
		if (clen > WS_CTL_MAX - keep)
			clen = WS_CTL_MAX - keep;
		memcpy(w->w_ctl + keep, clean, clen);
		OPENSSL_cleanse(clean, clen);
		free(clean);
		n = keep + clen;
	}
	emit(w, w->w_op, 1, w->w_ctl, n);
	OPENSSL_cleanse(w->w_ctl, sizeof(w->w_ctl));
	w->w_nctl = 0;
	return SEC_WS_OK;
}

/* A frame begins: is it one that may come now? */
static int
frame_begin(struct sec_ws *w, const struct wslay_frame_iocb *io)
{
	w->w_in_frame = 1;
	w->w_op = io->opcode;
	w->w_fin = io->fin;
	w->w_len = io->payload_length;
	w->w_off = 0;
	if (io->rsv != 0 || io->mask != (uint8_t)w->w_up)
		return -1;	/* an extension's bits; masking (5.1) */
	switch (io->opcode) {
	case WSLAY_CONTINUATION_FRAME:
		return w->w_msg_op != 0 ? 0 : -1;
	case WSLAY_TEXT_FRAME:
	case WSLAY_BINARY_FRAME:
		if (w->w_msg_op != 0)
			return -1;	/* a message inside a message */
		w->w_msg_op = io->opcode;
		w->w_msg_sent = 0;
		return 0;
	case WSLAY_CONNECTION_CLOSE:
	case WSLAY_PING:
	case WSLAY_PONG:
		w->w_nctl = 0;
		return 0;
	default:
		return -1;
	}
}

static enum sec_ws_res
piece(struct sec_ws *w, const struct wslay_frame_iocb *io)
{
	enum sec_ws_res	r;
	int		end;

	if (!w->w_in_frame && frame_begin(w, io) == -1)
		return SEC_WS_BAD;
	w->w_off += io->data_length;
	end = w->w_off == w->w_len;
	if (end)
		w->w_in_frame = 0;
	if (w->w_op & 0x8) {
		/* wslay: at most 125 bytes */
		memcpy(w->w_ctl + w->w_nctl, io->data, io->data_length);
		w->w_nctl += io->data_length;
		return end ? ctl_done(w) : SEC_WS_OK;
	}
	r = data_piece(w, io->data, io->data_length, end && w->w_fin);
	if (end && w->w_fin)
		w->w_msg_op = 0;
	return r;
}

enum sec_ws_res
sec_ws_feed(struct sec_ws *w, const char *p, size_t len,
    struct evbuffer *out)
{
	struct wslay_frame_iocb	io;
	enum sec_ws_res		res = SEC_WS_OK;
	ssize_t			r;

	if (w->w_dead)
		return SEC_WS_BAD;
	w->w_in = p;
	w->w_inlen = len;
	w->w_out = out;
	for (;;) {
		memset(&io, 0, sizeof(io));
		r = wslay_frame_recv(w->w_ctx, &io);
		if (r == WSLAY_ERR_WANT_READ)
			break;
		if (r < 0) {
			res = SEC_WS_BAD;
			break;
		}
		if ((res = piece(w, &io)) != SEC_WS_OK)
			break;
	}
	w->w_in = NULL;
	w->w_inlen = 0;
	w->w_out = NULL;
	if (res != SEC_WS_OK)
		w->w_dead = 1;
	return res;
}

void
sec_ws_close_frame(int masked, uint16_t code, const char *reason,
    struct evbuffer *out)
{
	struct sec_ws	*w = sec_ws_new(masked);
	uint8_t		 pl[WS_CTL_MAX];
	size_t		 n = strlen(reason);

	if (n > WS_CTL_MAX - 2)
		n = WS_CTL_MAX - 2;
	pl[0] = (uint8_t)(code >> 8);
	pl[1] = (uint8_t)(code & 0xff);
	memcpy(pl + 2, reason, n);
	w->w_out = out;
	emit(w, WSLAY_CONNECTION_CLOSE, 1, pl, n + 2);
	sec_ws_free(w);
}

int
sec_ws_allowed(const struct cfg_secret *s, int tls)
{
	return sec_ph_allowed(s, tls, CFG_PH_WS);
}

int
sec_ws_watch(const struct cfg *cfg)
{
	size_t	i;

	for (i = 0; i < cfg->c_nsecrets; i++)
		if (cfg->c_secrets[i].sc_placeholder != NULL)
			return 1;
	return 0;
}

struct sec_body *
sec_ws_subst_new(struct sec_req **srp, const struct cfg *cfg,
    const char *host, int tls)
{
	return sec_subst_new(srp, cfg, host, tls, CFG_PH_WS, SEC_BODY_RAW);
}

/* Unlike bodies, frames have no "as before" to keep: before placeholder_in
 * had ws, an upgrade towards a secret's host was refused. A placeholder in
 * frames is replaced, or it ends the connection. */
struct sec_trip *
sec_ws_trip_new(const struct cfg *cfg, const char *host, int tls)
{
	const struct cfg_secret	*s;
	struct sec_trip		*tr = NULL;
	size_t			 i;

	for (i = 0; i < cfg->c_nsecrets; i++) {
		s = &cfg->c_secrets[i];
		if (s->sc_placeholder == NULL || (sec_bound(s, host) &&
		    sec_ws_allowed(s, tls)))
			continue;
		if (tr == NULL)
			tr = sec_trip_new();
		sec_trip_add(tr, s->sc_placeholder);
	}
	return tr;
}
