"""Strict checks of a Prometheus text exposition (format 0.0.4).

check(text) returns {(name, labels-tuple): value} after checking, beyond
what the format allows, what airlock promises of its own /metrics: every
family has "# HELP" then "# TYPE" before its samples; a family's samples
are contiguous; names and label syntax; label values escaped (\\ \" \n
only); no duplicate series; no timestamps, blank lines or stray comments;
counters named *_total and never negative; histogram buckets with le
ascending, counts cumulative, le="+Inf" present and equal to _count, and a
_sum. Raises MetricsError with the line number on the first problem.

parse_prometheus_client(text) also runs prometheus_client's own parser
when the module is importable (returns the families or None).
"""

import math
import re

NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*\Z")
LABEL = re.compile(r"[a-zA-Z_][a-zA-Z0-9_]*")
VALUE = re.compile(r"([+-]?[0-9]+(\.[0-9]+)?([eE][+-]?[0-9]+)?|[+-]Inf|NaN)\Z")
TYPES = ("counter", "gauge", "histogram", "summary", "untyped")


class MetricsError(Exception):
    pass


def _labels(s, ln):
    """Parse 'a="x",b="y"' (the inside of the braces) -> tuple of pairs."""
    out = []
    i = 0
    while i < len(s):
        m = LABEL.match(s, i)
        if not m:
            raise MetricsError("line %d: bad label name at %r" % (ln, s[i:]))
        name = m.group(0)
        if name.startswith("__"):
            raise MetricsError("line %d: reserved label %s" % (ln, name))
        i = m.end()
        if s[i:i + 2] != '="':
            raise MetricsError("line %d: label %s: want =\"" % (ln, name))
        i += 2
        val = []
        while True:
            if i >= len(s):
                raise MetricsError("line %d: unterminated label value" % ln)
            c = s[i]
            if c == '"':
                break
            if c == "\\":
                i += 1
                e = s[i:i + 1]
                if e not in ("\\", '"', "n"):
                    raise MetricsError("line %d: bad escape \\%s" % (ln, e))
                val.append("\n" if e == "n" else e)
            else:
                val.append(c)
            i += 1
        i += 1
        if any(n == name for n, _ in out):
            raise MetricsError("line %d: label %s twice" % (ln, name))
        out.append((name, "".join(val)))
        if i < len(s):
            if s[i] != "," or i + 1 == len(s):
                raise MetricsError("line %d: want , between labels" % ln)
            i += 1
    return tuple(out)


def _family_of(name, fam, typ):
    if typ == "histogram":
        return any(name == fam + s for s in ("_bucket", "_sum", "_count"))
    if typ == "summary":
        return any(name == fam + s for s in ("", "_sum", "_count"))
    return name == fam


def check(text):
    if not text:
        raise MetricsError("empty exposition")
    if not text.endswith("\n"):
        raise MetricsError("no newline at the end")
    families = {}          # name -> type
    order = []
    cur = None
    helped = None
    samples = {}           # (name, labels) -> value
    seq = []               # (family, name, labels, value) in order
    for ln, line in enumerate(text[:-1].split("\n"), 1):
        if line == "":
            raise MetricsError("line %d: blank line" % ln)
        if "\r" in line or "\t" in line:
            raise MetricsError("line %d: CR or tab" % ln)
        if line.startswith("# HELP "):
            parts = line.split(" ", 3)
            if len(parts) != 4 or not NAME.match(parts[2]) or not parts[3]:
                raise MetricsError("line %d: bad HELP" % ln)
            if not re.match(r"([^\\]|\\[\\n])*\Z", parts[3]):
                raise MetricsError("line %d: bad escape in HELP" % ln)
            if parts[2] in families or parts[2] == helped:
                raise MetricsError("line %d: family %s declared twice (or "
                                   "not contiguous)" % (ln, parts[2]))
            helped = parts[2]
            cur = None
            continue
        if line.startswith("# TYPE "):
            parts = line.split(" ")
            if len(parts) != 4 or parts[2] != helped:
                raise MetricsError("line %d: TYPE not right after its "
                                   "HELP" % ln)
            if parts[3] not in TYPES:
                raise MetricsError("line %d: unknown type %s" % (ln, parts[3]))
            cur = helped
            helped = None
            families[cur] = parts[3]
            order.append(cur)
            continue
        if line.startswith("#"):
            raise MetricsError("line %d: stray comment" % ln)
        if cur is None:
            raise MetricsError("line %d: sample before HELP and TYPE" % ln)
        m = re.match(r"([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})? (\S+)\Z", line)
        if not m:
            raise MetricsError("line %d: bad sample line %r" % (ln, line))
        name, labels, value = m.group(1), m.group(3), m.group(4)
        typ = families[cur]
        if not _family_of(name, cur, typ):
            raise MetricsError("line %d: sample %s under family %s (not "
                               "declared by HELP and TYPE before it?)"
                               % (ln, name, cur))
        lab = _labels(labels, ln) if labels is not None else ()
        if labels == "":
            raise MetricsError("line %d: empty braces" % ln)
        if not VALUE.match(value):
            raise MetricsError("line %d: bad value %r" % (ln, value))
        v = float(value)
        if typ == "counter":
            if not cur.endswith("_total"):
                raise MetricsError("line %d: counter %s without _total"
                                   % (ln, cur))
            if math.isnan(v) or v < 0:
                raise MetricsError("line %d: counter %s = %s" % (ln, name, v))
        is_bucket = typ == "histogram" and name == cur + "_bucket"
        has_le = any(k == "le" for k, _ in lab)
        if is_bucket != has_le:
            raise MetricsError("line %d: le label %s" % (
                ln, "missing" if is_bucket else "outside a bucket"))
        key = (name, tuple(sorted(lab)))
        if key in samples:
            raise MetricsError("line %d: series %s twice" % (ln, line))
        samples[key] = v
        seq.append((cur, name, lab, v))
    if helped is not None:
        raise MetricsError("HELP %s without TYPE" % helped)
    _histograms(families, seq)
    return samples


def _histograms(families, seq):
    groups = {}
    for fam, name, lab, v in seq:
        if families[fam] != "histogram":
            continue
        rest = tuple(sorted((k, x) for k, x in lab if k != "le"))
        g = groups.setdefault((fam, rest), {"buckets": [], "sum": None,
                                            "count": None})
        if name == fam + "_bucket":
            le = dict(lab)["le"]
            if not VALUE.match(le) or le == "NaN":
                raise MetricsError("%s: bad le %r" % (fam, le))
            g["buckets"].append((float(le), v))
        elif name == fam + "_sum":
            g["sum"] = v
        else:
            g["count"] = v
    for (fam, rest), g in groups.items():
        b = g["buckets"]
        if not b or b[-1][0] != math.inf:
            raise MetricsError("%s%s: no le=\"+Inf\" bucket last" % (fam, rest))
        for (le0, n0), (le1, n1) in zip(b, b[1:]):
            if le1 <= le0:
                raise MetricsError("%s: le %g after %g" % (fam, le1, le0))
            if n1 < n0:
                raise MetricsError("%s: bucket le=%g has %g < %g: not "
                                   "cumulative" % (fam, le1, n1, n0))
        if g["count"] is None or g["sum"] is None:
            raise MetricsError("%s%s: _count or _sum missing" % (fam, rest))
        if g["count"] != b[-1][1]:
            raise MetricsError("%s: +Inf bucket %g != _count %g"
                               % (fam, b[-1][1], g["count"]))


def parse_prometheus_client(text):
    """prometheus_client's parser, if installed: list of families."""
    try:
        from prometheus_client.parser import text_string_to_metric_families
    except ImportError:
        return None
    return list(text_string_to_metric_families(text))


def get(samples, name, **labels):
    """Value of one series (0 when absent, as a counter not yet seen)."""
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)
