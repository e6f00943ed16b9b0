/*
 * GeoIP on libmaxminddb. The file is mmap(2)ed read-only at open; a
 * lookup walks the search tree and reads two values from the data
 * section, without allocating or writing to shared state, so every
 * worker may use one handle at once.
 */
#include "config.h"

#include <sys/stat.h>

#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <maxminddb.h>

#include "cfg/cfg.h"
#include "dns/net_guard.h"
#include "geo/geo.h"
#include "util/util.h"

struct geo {
	MMDB_s		g_db;
};

struct geo *
geo_open(const char *path, char *why, size_t whysz)
{
	struct geo	*g;
	struct stat	 st;
	int		 rc;

	/* mmap(2) of an empty file or a directory fails as EINVAL: say so */
	if (stat(path, &st) == -1) {
		snprintf(why, whysz, "%s", strerror(errno));
		return NULL;
	}
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, whysz, "not a regular file");
		return NULL;
	}
	if (st.st_size == 0) {
		snprintf(why, whysz, "not a MaxMind DB (.mmdb) file: empty");
		return NULL;
	}
	g = xcalloc(1, sizeof(*g));
	errno = 0;
	if ((rc = MMDB_open(path, MMDB_MODE_MMAP, &g->g_db)) != MMDB_SUCCESS) {
		switch (rc) {
		case MMDB_FILE_OPEN_ERROR:
		case MMDB_IO_ERROR:
			snprintf(why, whysz, "%s", errno != 0 ?
			    strerror(errno) : MMDB_strerror(rc));
			break;
		case MMDB_OUT_OF_MEMORY_ERROR:
			snprintf(why, whysz, "%s", MMDB_strerror(rc));
			break;
		default:
			/* metadata marker missing, bad tree, unknown format */
			snprintf(why, whysz, "not a MaxMind DB (.mmdb) file: "
			    "%s", MMDB_strerror(rc));
			break;
		}
		free(g);
		return NULL;
	}
	if (g->g_db.metadata.ip_version != 4 &&
	    g->g_db.metadata.ip_version != 6) {
		snprintf(why, whysz, "not a MaxMind DB (.mmdb) file: IP "
		    "version %u", (unsigned)g->g_db.metadata.ip_version);
		MMDB_close(&g->g_db);
		free(g);
		return NULL;
	}
	return g;
}

void
geo_close(struct geo *g)
{
	if (g == NULL)
		return;
	MMDB_close(&g->g_db);
	free(g);
}

/* A two-letter code at <path>, upper-cased into cc; 0 or -1. */
static int
geo_iso_code(MMDB_entry_s *e, const char *const *path, char cc[3])
{
	MMDB_entry_data_s	d;
	const char		*s;

	if (MMDB_aget_value(e, &d, path) != MMDB_SUCCESS || !d.has_data ||
	    d.type != MMDB_DATA_TYPE_UTF8_STRING || d.data_size != 2)
		return -1;
	s = d.utf8_string;
	if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z')) ||
	    !((s[1] >= 'A' && s[1] <= 'Z') || (s[1] >= 'a' && s[1] <= 'z')))
		return -1;
	cc[0] = (char)(s[0] & ~0x20);
	cc[1] = (char)(s[1] & ~0x20);
	cc[2] = '\0';
	return 0;
}

int
geo_lookup(const struct geo *g, const struct sockaddr *sa, char country[3],
    uint32_t *asn)
{
	/* arrays, not varargs: MMDB_get_value allocates its path copy */
	static const char *const p_country[] = { "country", "iso_code", NULL };
	static const char *const p_registered[] = { "registered_country",
	    "iso_code", NULL };
	static const char *const p_asn[] = { "autonomous_system_number",
	    NULL };
	const struct sockaddr_in6	*sin6;
	struct sockaddr_in		 sin;
	MMDB_lookup_result_s		 res;
	MMDB_entry_data_s		 d;
	int				 err;

	country[0] = '\0';
	*asn = 0;
	if (g == NULL || sa == NULL)
		return -1;
	if (sa->sa_family == AF_INET6) {
		/* ::ffff:a.b.c.d is a.b.c.d, also in an IPv4-only file */
		sin6 = (const struct sockaddr_in6 *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&sin6->sin6_addr)) {
			memset(&sin, 0, sizeof(sin));
			sin.sin_family = AF_INET;
			memcpy(&sin.sin_addr, &sin6->sin6_addr.s6_addr[12], 4);
			sa = (const struct sockaddr *)&sin;
		}
	} else if (sa->sa_family != AF_INET)
		return -1;
	res = MMDB_lookup_sockaddr(&g->g_db, sa, &err);
	if (err != MMDB_SUCCESS || !res.found_entry)
		return -1;
	if (geo_iso_code(&res.entry, p_country, country) == -1 &&
	    geo_iso_code(&res.entry, p_registered, country) == -1)
		country[0] = '\0';
	if (MMDB_aget_value(&res.entry, &d, p_asn) == MMDB_SUCCESS &&
	    d.has_data) {
		switch (d.type) {
		case MMDB_DATA_TYPE_UINT16:
			*asn = d.uint16;
			break;
		case MMDB_DATA_TYPE_UINT32:
			*asn = d.uint32;
			break;
		case MMDB_DATA_TYPE_INT32:
			*asn = d.int32 > 0 ? (uint32_t)d.int32 : 0;
			break;
		case MMDB_DATA_TYPE_UINT64:
			*asn = d.uint64 <= UINT32_MAX ? (uint32_t)d.uint64 : 0;
			break;
		}
	}
	return 0;
}

int
geo_lookup_addr(const struct geo *g, const struct net_addr *a,
    char country[3], uint32_t *asn)
{
	struct sockaddr_in	sin;
	struct sockaddr_in6	sin6;

	if (a->na_family == AF_INET) {
		memset(&sin, 0, sizeof(sin));
		sin.sin_family = AF_INET;
		memcpy(&sin.sin_addr, a->na_bytes, 4);
		return geo_lookup(g, (struct sockaddr *)&sin, country, asn);
	}
	memset(&sin6, 0, sizeof(sin6));
	sin6.sin6_family = AF_INET6;
	memcpy(&sin6.sin6_addr, a->na_bytes, 16);
	return geo_lookup(g, (struct sockaddr *)&sin6, country, asn);
}

static int
geo_in(const char (*list)[3], size_t n, const char *cc)
{
	size_t	i;

	for (i = 0; i < n; i++)
		if (strcmp(list[i], cc) == 0)
			return 1;
	return 0;
}

int
geo_policy_allows(const struct cfg_policy *p, const char *country,
    const char **rule)
{
	*rule = NULL;
	if (p == NULL)
		return 1;
	if (country[0] != '\0' &&
	    geo_in(p->p_geo_deny, p->p_ngeo_deny, country)) {
		*rule = "geo.deny_countries";
		return 0;
	}
	/* an allow list is closed: an unknown country is not on it */
	if (p->p_ngeo_allow > 0 && (country[0] == '\0' ||
	    !geo_in(p->p_geo_allow, p->p_ngeo_allow, country))) {
		*rule = "geo.allow_countries";
		return 0;
	}
	return 1;
}
