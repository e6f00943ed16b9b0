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
#include "util/util.h"

#define POL_HOST_MAX	253	/* RFC 1035, without the trailing dot */
#define POL_LABEL_MAX	63

/* Is <p> (at least 3 bytes readable) "%2F" in either case? */
static int
pol_is_enc_slash(const char *p)
{
	return p[0] == '%' && p[1] == '2' && (p[2] == 'F' || p[2] == 'f');
}

/*
 * First pass: check escapes, decode the unreserved ones, upper-case the
 * rest. An encoded slash is decoded to '/' when <slash> is set, else kept
 * exactly as the client wrote it ("%2f" stays "%2f": it goes upstream
 * like that) and counted in *nslash. The result is never longer than the
 * input. Returns its length or -1.
 */
static ssize_t
pol_path_decode(const char *in, size_t len, char *out, size_t outsz,
    int slash, size_t *nslash)
{
	static const char	 hex[] = "0123456789ABCDEF";
	const unsigned char	*p = (const unsigned char *)in;
	size_t			 i, w = 0;
	int			 hi, lo;
	unsigned char		 c;

	*nslash = 0;
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
		if ((hi = util_hex_val(p[i + 1])) == -1 ||
		    (lo = util_hex_val(p[i + 2])) == -1)
			return -1;
		c = (unsigned char)(hi << 4 | lo);
		/* a '\' is a separator to some upstreams; NUL ends strings */
		if (c == '\\' || c == '\0')
			return -1;
		if (c == '/' && !slash) {
			if (w + 3 >= outsz)
				return -1;
			memcpy(out + w, in + i, 3);	/* as sent */
			w += 3;
			(*nslash)++;
		} else if (util_unreserved(c) || c == '/') {
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
		i += 2;
	}
	out[w] = '\0';
	return (ssize_t)w;
}

/*
 * Is the segment b[s, s + seg) a dot segment with ";" parameters (".;x",
 * "..;", "..%3B")? Tomcat and Spring strip parameters before resolving
 * dots, so "/v1/..;/admin" is "/admin" there: such a segment cannot be
 * judged as the name it looks like to everyone else.
 */
static int
pol_dot_params(const char *b, size_t s, size_t seg)
{
	size_t	d = 0;

	while (d < seg && d < 2 && b[s + d] == '.')
		d++;
	if (d == 0 || d == seg)
		return 0;
	return b[s + d] == ';' || (seg - d >= 3 && b[s + d] == '%' &&
	    b[s + d + 1] == '3' && (b[s + d + 2] == 'B' ||
	    b[s + d + 2] == 'b'));
}

/*
 * Second pass, in place: RFC 3986 5.2.4 remove_dot_segments, except that
 * ".." at the root is an error rather than ignored, since a client that
 * sends it is probing, and so is a dot segment with parameters. A
 * trailing "." or ".." leaves a trailing slash. Writing never overtakes
 * reading: w stays at or before the slash that starts the segment being
 * read.
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
		if (pol_dot_params(b, s, seg))
			return -1;
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

/* Does the path (starting with '/') have a ".", ".." or ".;" segment? */
static int
pol_path_has_dots(const char *b)
{
	const char	*seg = b;
	size_t		 len;

	while (*seg == '/') {
		seg++;
		len = strcspn(seg, "/");
		if ((len == 1 && seg[0] == '.') ||
		    (len == 2 && seg[0] == '.' && seg[1] == '.') ||
		    pol_dot_params(seg, 0, len))
			return 1;
		seg += len;
	}
	return 0;
}

int
pol_path_slash_reading(const char *path, char *out, size_t outsz)
{
	size_t	r, w = 0;

	if (outsz == 0)
		return -1;
	for (r = 0; path[r] != '\0'; r++) {
		if (w + 1 >= outsz)
			return -1;
		if (pol_is_enc_slash(path + r)) {
			out[w++] = '/';
			r += 2;
		} else
			out[w++] = path[r];
	}
	out[w] = '\0';
	return 0;
}

int
pol_path_has_enc_slash(const char *path)
{
	for (; *path != '\0'; path++)
		if (pol_is_enc_slash(path))
			return 1;
	return 0;
}

int
pol_path_double_encoded(const char *path)
{
	const char	*p;

	for (p = path; (p = strstr(p, "%25")) != NULL; p += 3)
		if (util_hex_val((unsigned char)p[3]) != -1 &&
		    util_hex_val((unsigned char)p[4]) != -1)
			return 1;
	return 0;
}

/*
 * A path with "%2F": both readings an upstream may use must name the
 * same thing. <kept> is the path with "%2F" kept as data (dots resolved);
 * the other reading decodes "%2F" before resolving. They agree exactly
 * when decoding "%2F" in <kept> makes no dot segment and the client's
 * own path, decoded the same way, resolves to the same string; otherwise
 * "/a/b%2F..%2F..%2Fadmin" or "/a/x%2Fy/../z" would be one resource to
 * us and another to the upstream. Returns 0 or -1.
 */
static int
pol_path_slash_agree(const char *in, size_t len, const char *kept)
{
	char	slashed[POL_PATH_MAX], decoded[POL_PATH_MAX];
	size_t	nslash;
	ssize_t	n;

	if (pol_path_slash_reading(kept, slashed, sizeof(slashed)) == -1 ||
	    pol_path_has_dots(slashed))
		return -1;
	if ((n = pol_path_decode(in, len, decoded, sizeof(decoded), 1,
	    &nslash)) == -1 || pol_path_dots(decoded, (size_t)n) == -1)
		return -1;
	return strcmp(slashed, decoded) == 0 ? 0 : -1;
}

int
pol_path_normalize(const char *in, size_t len, char *out, size_t outsz)
{
	ssize_t	n;
	size_t	nslash;

	if (in == NULL || out == NULL || outsz == 0)
		return -1;
	if (len == 0 || in[0] != '/')
		return -1;
	if ((n = pol_path_decode(in, len, out, outsz, 0, &nslash)) == -1)
		return -1;
	if (pol_path_dots(out, (size_t)n) == -1)
		return -1;
	if (nslash > 0 && (len >= POL_PATH_MAX ||
	    pol_path_slash_agree(in, len, out) == -1))
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
