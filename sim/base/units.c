/* units.c — parsing and printing quantities that carry explicit units (see units.h).
 *
 * Responsible for: turning "25.5 GB/s", "64 KiB", "0.5 ms", "312 TFLOP/s" into bytes per second,
 * bytes, nanoseconds and FLOP/s, and the reverse for tables.
 * Not responsible for: deciding which quantity a config field holds (hw.c, scenario readers).
 *
 * How a quantity is read: optional surrounding whitespace, a plain decimal number (digits, an
 * optional fraction, an optional exponent; no sign, no hex, no inf/nan), optional whitespace, then
 * a unit that must match one of the kind's table entries exactly. Arithmetic is done in long
 * double so that decimal inputs such as "7.68 TB" round to the intended integer.
 * Invariants: every failure fills the KvErr with the quoted input, what was expected, and the
 * accepted units of that kind; on failure the output is left untouched.
 */
#include "sim/base/units.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct UnitDef {
    const char *name;
    long double factor; /* output units (bytes, B/s, ns, FLOP/s) per one of this unit */
} UnitDef;

typedef struct UnitKind {
    const char *what;    /* "a rate" */
    const char *example; /* "25.5 GB/s" */
    const UnitDef *units;
    int n_units;
} UnitKind;

#define KIB 1024.0L
#define MIB (KIB * KIB)
#define GIB (MIB * KIB)
#define TIB (GIB * KIB)
#define PIB (TIB * KIB)

static const UnitDef RATE_UNITS[] = {
    {"B/s", 1.0L},         {"kB/s", 1e3L},         {"KB/s", 1e3L},        {"MB/s", 1e6L},
    {"GB/s", 1e9L},        {"TB/s", 1e12L},        {"KiB/s", KIB},        {"MiB/s", MIB},
    {"GiB/s", GIB},        {"TiB/s", TIB},         {"bps", 1.0L / 8},     {"b/s", 1.0L / 8},
    {"bit/s", 1.0L / 8},   {"kbps", 1e3L / 8},     {"Kbps", 1e3L / 8},    {"kb/s", 1e3L / 8},
    {"Kb/s", 1e3L / 8},    {"Mbps", 1e6L / 8},     {"Mb/s", 1e6L / 8},    {"Mbit/s", 1e6L / 8},
    {"Gbps", 1e9L / 8},    {"Gb/s", 1e9L / 8},     {"Gbit/s", 1e9L / 8},  {"Tbps", 1e12L / 8},
    {"Tb/s", 1e12L / 8},   {"Kibps", KIB / 8},     {"Kib/s", KIB / 8},    {"Mibps", MIB / 8},
    {"Mib/s", MIB / 8},    {"Gibps", GIB / 8},     {"Gib/s", GIB / 8},    {"Tibps", TIB / 8},
    {"Tib/s", TIB / 8},
};

static const UnitDef SIZE_UNITS[] = {
    {"B", 1.0L},   {"kB", 1e3L},  {"KB", 1e3L},  {"MB", 1e6L},  {"GB", 1e9L},  {"TB", 1e12L},
    {"PB", 1e15L}, {"KiB", KIB},  {"MiB", MIB},  {"GiB", GIB},  {"TiB", TIB},  {"PiB", PIB},
};

static const UnitDef DURATION_UNITS[] = {
    {"ns", 1.0L},
    {"us", 1e3L},
    {"\xC2\xB5s", 1e3L}, /* µs, U+00B5 MICRO SIGN */
    {"\xCE\xBCs", 1e3L}, /* μs, U+03BC GREEK SMALL LETTER MU */
    {"ms", 1e6L},
    {"s", 1e9L},
    {"min", 60e9L},
    {"h", 3600e9L},
};

static const UnitDef FLOPS_UNITS[] = {
    {"FLOP/s", 1.0L},   {"kFLOP/s", 1e3L},  {"MFLOP/s", 1e6L},  {"GFLOP/s", 1e9L},  {"TFLOP/s", 1e12L},
    {"PFLOP/s", 1e15L}, {"FLOPS", 1.0L},    {"MFLOPS", 1e6L},   {"GFLOPS", 1e9L},
    {"TFLOPS", 1e12L},  {"PFLOPS", 1e15L},
};

static const UnitKind KIND_RATE = {"a rate", "25.5 GB/s", RATE_UNITS, (int)KV_ARRAY_LEN(RATE_UNITS)};
static const UnitKind KIND_SIZE = {"a size", "80 GB", SIZE_UNITS, (int)KV_ARRAY_LEN(SIZE_UNITS)};
static const UnitKind KIND_DURATION = {"a duration", "5 us", DURATION_UNITS,
                                       (int)KV_ARRAY_LEN(DURATION_UNITS)};
static const UnitKind KIND_FLOPS = {"a compute rate", "312 TFLOP/s", FLOPS_UNITS,
                                    (int)KV_ARRAY_LEN(FLOPS_UNITS)};

static int is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Fail with: expected <what> with a unit such as "<example>", got "<text>" (<why>; accepted
 * units: ...). Long inputs are shortened in the quote. Returns -1. */
static int unit_fail(KvErr *e, const UnitKind *k, const char *text, const char *why)
{
    char units[512];
    size_t used = 0;
    units[0] = '\0';
    for (int i = 0; i < k->n_units && used + 1 < sizeof units; i++) {
        int n = snprintf(units + used, sizeof units - used, "%s%s", i ? ", " : "", k->units[i].name);
        if (n < 0) break;
        used += (size_t)n;
    }
    if (!text)
        return kv_err(e, "expected %s with a unit such as \"%s\", got nothing (accepted units: %s)",
                      k->what, k->example, units);
    size_t len = strlen(text);
    return kv_err(e, "expected %s with a unit such as \"%s\", got \"%.*s%s\" (%s; accepted units: %s)",
                  k->what, k->example, len > 80 ? 77 : (int)len, text, len > 80 ? "..." : "",
                  why, units);
}

/* Parse "<number> <unit>" of kind k into value * factor (a non-negative long double). */
static int parse_quantity(const char *s, const UnitKind *k, long double *out, KvErr *e)
{
    if (!s) return unit_fail(e, k, NULL, "");
    const char *p = s;
    while (is_space(*p)) p++;
    if (*p == '-') return unit_fail(e, k, s, "negative values are not allowed");
    if (*p == '+') p++;
    const char *num = p;
    int digits = 0;
    while (is_digit(*p)) p++, digits++;
    if (*p == '.') {
        p++;
        while (is_digit(*p)) p++, digits++;
    }
    if (!digits) return unit_fail(e, k, s, "no number");
    if (*p == 'e' || *p == 'E') {
        const char *q = p + 1;
        if (*q == '+' || *q == '-') q++;
        if (is_digit(*q)) {
            while (is_digit(*q)) q++;
            p = q;
        }
    }
    char numbuf[64];
    size_t nlen = (size_t)(p - num);
    if (nlen >= sizeof numbuf) return unit_fail(e, k, s, "number too long");
    memcpy(numbuf, num, nlen);
    numbuf[nlen] = '\0';
    errno = 0;
    long double v = strtold(numbuf, NULL);
    if (errno == ERANGE && v != 0) return unit_fail(e, k, s, "number out of range");

    while (is_space(*p)) p++;
    const char *unit = p;
    const char *end = unit + strlen(unit);
    while (end > unit && is_space(end[-1])) end--;
    size_t ulen = (size_t)(end - unit);
    if (ulen == 0) return unit_fail(e, k, s, "no unit");
    for (int i = 0; i < k->n_units; i++) {
        if (strlen(k->units[i].name) == ulen && memcmp(k->units[i].name, unit, ulen) == 0) {
            long double r = v * k->units[i].factor;
            if (!isfinite(r)) return unit_fail(e, k, s, "out of range");
            *out = r;
            return 0;
        }
    }
    char why[96];
    snprintf(why, sizeof why, "unknown unit \"%.*s\"", ulen > 40 ? 40 : (int)ulen, unit);
    return unit_fail(e, k, s, why);
}

int kv_parse_rate(const char *s, double *bytes_per_s, KvErr *e)
{
    long double v;
    if (parse_quantity(s, &KIND_RATE, &v, e) != 0) return -1;
    if (v > 1e300L) return unit_fail(e, &KIND_RATE, s, "out of range");
    *bytes_per_s = (double)v;
    return 0;
}

int kv_parse_flops(const char *s, double *flops_per_s, KvErr *e)
{
    long double v;
    if (parse_quantity(s, &KIND_FLOPS, &v, e) != 0) return -1;
    if (v > 1e300L) return unit_fail(e, &KIND_FLOPS, s, "out of range");
    *flops_per_s = (double)v;
    return 0;
}

int kv_parse_size(const char *s, uint64_t *bytes, KvErr *e)
{
    long double v;
    if (parse_quantity(s, &KIND_SIZE, &v, e) != 0) return -1;
    long double r = floorl(v + 0.5L);
    if (r >= 18446744073709551616.0L)
        return unit_fail(e, &KIND_SIZE, s, "out of range: at most 2^64-1 bytes");
    *bytes = (uint64_t)r;
    return 0;
}

int kv_parse_duration(const char *s, int64_t *ns, KvErr *e)
{
    long double v;
    if (parse_quantity(s, &KIND_DURATION, &v, e) != 0) return -1;
    long double r = floorl(v + 0.5L);
    if (r >= 9223372036854775807.0L)
        return unit_fail(e, &KIND_DURATION, s, "out of range: at most 2^63-1 ns (about 292 years)");
    *ns = (int64_t)r;
    return 0;
}

/* ---- formatting ---- */

/* Decimals used when printing a scaled value x: fixed, or three significant digits (fixed < 0). */
static int fmt_decimals(double x, int fixed)
{
    if (fixed >= 0) return fixed;
    double a = fabs(x);
    return a < 10 ? 2 : a < 100 ? 1 : 0;
}

/* Print v in the largest unit whose factor is <= |v| (the first unit for small values), moving up
 * one unit when rounding would print 1000 or more. factors ascend by 1000 each step. */
static void fmt_scaled(char *buf, int len, double v, const char *const *names, const double *factors,
                       int n, int fixed_decimals, int integer_first)
{
    if (!buf || len <= 0) return;
    if (isnan(v) || isinf(v)) {
        snprintf(buf, (size_t)len, "%s %s", isnan(v) ? "nan" : (v < 0 ? "-inf" : "inf"), names[0]);
        return;
    }
    int i = 0;
    while (i + 1 < n && fabs(v) >= factors[i + 1]) i++;
    for (;;) {
        double x = v / factors[i];
        int d = (integer_first && i == 0) ? 0 : fmt_decimals(x, fixed_decimals);
        double scale = pow(10.0, d);
        double r = round(x * scale) / scale;
        if (fabs(r) >= 1000.0 && i + 1 < n) {
            i++;
            continue;
        }
        snprintf(buf, (size_t)len, "%.*f %s", d, r, names[i]);
        return;
    }
}

void kv_fmt_rate(char *buf, int len, double bytes_per_s)
{
    static const char *const names[] = {"B/s", "kB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
    static const double f[] = {1, 1e3, 1e6, 1e9, 1e12, 1e15};
    fmt_scaled(buf, len, bytes_per_s, names, f, 6, 2, 0);
}

void kv_fmt_size(char *buf, int len, double bytes)
{
    static const char *const names[] = {"B", "kB", "MB", "GB", "TB", "PB"};
    static const double f[] = {1, 1e3, 1e6, 1e9, 1e12, 1e15};
    fmt_scaled(buf, len, bytes, names, f, 6, 2, 1);
}

void kv_fmt_duration(char *buf, int len, double ns)
{
    static const char *const names[] = {"ns", "us", "ms", "s"};
    static const double f[] = {1, 1e3, 1e6, 1e9};
    fmt_scaled(buf, len, ns, names, f, 4, -1, 0);
}

void kv_fmt_flops(char *buf, int len, double flops_per_s)
{
    static const char *const names[] = {"FLOP/s", "kFLOP/s", "MFLOP/s", "GFLOP/s", "TFLOP/s", "PFLOP/s"};
    static const double f[] = {1, 1e3, 1e6, 1e9, 1e12, 1e15};
    fmt_scaled(buf, len, flops_per_s, names, f, 6, 1, 0);
}
