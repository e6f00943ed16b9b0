/*
 * Normalisation of the request facts that rules match on: the path and
 * the host. Both must be canonical before matching, or "/v1/%2e%2e/admin"
 * and "/admin" would be judged as different paths by the policy but as
 * the same one by the upstream.
 */
#include "config.h"

#include <sys/types.h>
#include <netinet/in.h>

#include <stddef.h>
#include <string.h>

#include "dns/net_guard.h"
#include "policy/pol.h"

#define POL_HOST_MAX	253	/* RFC 1035, without the trailing dot */
#define POL_LABEL_MAX	63

static int
pol_hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* RFC 3986 unreserved: ALPHA DIGIT - . _ ~ */
static int
pol_unreserved(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	    (c >= '0' && c <= '9') || c == '-' || c == '.' || c == '_' ||
	    c == '~';
}

/*
 * First pass: check escapes, decode the unreserved ones, upper-case the
 * rest. The result is never longer than the input. Returns its length or
 * -1.
 */
static ssize_t
pol_path_decode(const char *in, size_t len, char *out, size_t outsz)
{
	static const char	 hex[] = "0123456789ABCDEF";
	const unsigned char	*p = (const unsigned char *)in;
	size_t			 i, w = 0;
	int			 hi, lo;
	unsigned char		 c;

	for (i = 0; i < len; i++) {
		c = p[i];
		/* NUL, controls, space and DEL never belong in a path */
		if (c <= 0x20 || c == 0x7f || c == '\\')
			return -1;
		if (c != '%') {
			if (w + 1 >= outsz)
				return -1;
			out[w++] = (char)c;
			continue;
		}
		if (i + 2 >= len)
			return -1;	/* truncated escape */
		if ((hi = pol_hexval(p[i + 1])) == -1 ||
		    (lo = pol_hexval(p[i + 2])) == -1)
			return -1;
		i += 2;
		c = (unsigned char)(hi << 4 | lo);
		/*
		 * An encoded '/' or '\' would be one segment to us and a
		 * separator to some upstreams; NUL ends strings there.
		 */
		if (c == '/' || c == '\\' || c == '\0')
			return -1;
		if (pol_unreserved(c)) {
			if (w + 1 >= outsz)
				return -1;
			out[w++] = (char)c;
		} else {
			if (w + 3 >= outsz)
				return -1;
			out[w++] = '%';
			out[w++] = hex[hi];
			out[w++] = hex[lo];
		}
	}
	out[w] = '\0';
	return (ssize_t)w;
}

/*
 * Second pass, in place: RFC 3986 5.2.4 remove_dot_segments, except that
 * ".." at the root is an error rather than ignored, since a client that
 * sends it is probing. A trailing "." or ".." leaves a trailing slash.
 * Writing never overtakes reading: w stays at or before the slash that
 * starts the segment being read.
 */
static ssize_t
pol_path_dots(char *b, size_t n)
{
	size_t	r = 0, w = 0, s, seg;
	int	last;

	while (r < n) {
		r++;				/* the '/' */
		s = r;
		while (r < n && b[r] != '/')
			r++;
		seg = r - s;
		last = r == n;
		if (seg == 1 && b[s] == '.') {
			if (last)
				b[w++] = '/';
			continue;
		}
		if (seg == 2 && b[s] == '.' && b[s + 1] == '.') {
			if (w == 0)
				return -1;	/* above the root */
			while (b[--w] != '/')
				;
			if (last)
				b[w++] = '/';
			continue;
		}
		b[w++] = '/';
		memmove(b + w, b + s, seg);
		w += seg;
	}
	b[w] = '\0';
	return (ssize_t)w;
}

int
pol_path_normalize(const char *in, size_t len, char *out, size_t outsz)
{
	ssize_t	n;

	if (in == NULL || out == NULL || outsz == 0)
		return -1;
	if (len == 0 || in[0] != '/')
		return -1;
	if ((n = pol_path_decode(in, len, out, outsz)) == -1)
		return -1;
	if (pol_path_dots(out, (size_t)n) == -1)
		return -1;
	return 0;
}

int
pol_host_normalize(const char *in, char *out, size_t outsz)
{
	char		 buf[POL_HOST_MAX + 2], txt[INET6_ADDRSTRLEN];
	struct net_addr	 a;
	size_t		 len, i, lab;
	int		 r;
	unsigned char	 c;

	if (in == NULL || out == NULL || outsz == 0)
		return -1;
	len = strlen(in);
	if (len == 0 || len >= sizeof(buf))
		return -1;
	for (i = 0; i < len; i++) {
		c = (unsigned char)in[i];
		buf[i] = (char)(c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c);
	}
	buf[len] = '\0';
	if (buf[len - 1] == '.')
		buf[--len] = '\0';
	if (len == 0)
		return -1;

	if ((r = net_host_literal(buf, &a)) == -1)
		return -1;
	if (r == 1) {
		net_addr_format(&a, txt, sizeof(txt));
		if (strlen(txt) >= outsz)
			return -1;
		memcpy(out, txt, strlen(txt) + 1);
		return 0;
	}

	/* A name: LDH plus '_', which real service names use. */
	if (len > POL_HOST_MAX)
		return -1;
	for (i = 0, lab = 0; i < len; i++) {
		c = (unsigned char)buf[i];
		if (c == '.') {
			if (lab == 0)
				return -1;	/* empty label */
			lab = 0;
			continue;
		}
		if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
		    c == '-' || c == '_'))
			return -1;
		if (++lab > POL_LABEL_MAX)
			return -1;
	}
	if (lab == 0)
		return -1;
	if (len >= outsz)
		return -1;
	memcpy(out, buf, len + 1);
	return 0;
}
