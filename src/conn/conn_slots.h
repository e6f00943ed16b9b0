/*
 * Slots of connections that have not identified yet (explicit listener,
 * before a head with valid credentials or a default sandbox). A sandbox's
 * connections count against it only once identified, so until then they
 * are bounded per source address and to a share of max_connections, and
 * have limits.identify_timeout to identify: one source holding unfinished
 * heads cannot take the slots of everyone else.
 */
#ifndef AIRLOCK_CONN_SLOTS_H
#define AIRLOCK_CONN_SLOTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

struct conn;

/*
 * Take an unidentified slot for <c>, accepted from <sa>. Returns NULL
 * (c->c_slot set), or why not (a static string: answer 503 overloaded).
 */
const char	*conn_slot_take(struct conn *c, const struct sockaddr *sa);
/* <c> identified, or ends: its slot is free (idempotent). */
void		 conn_slot_release(struct conn *c);
/* A head timer of <ms> for <c>, shortened to what is left of its
   identify_timeout while it holds a slot (at least 1 ms). */
uint64_t	 conn_slot_bound_ms(const struct conn *c, uint64_t ms);

#endif
