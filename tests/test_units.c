/* test_units.c — units.c: every accepted form of rates, sizes, durations and FLOP/s with
 * hand-computed values, every kind of refusal and its message, and the table formatters. */
#include <stdint.h>

#include "tests/harness.h"
#include "sim/base/units.h"

TEST(units_rate_forms)
{
    KvErr e = {{0}};
    double v = -1;
    CHECK(kv_parse_rate("25.5 GB/s", &v, &e) == 0);
    CHECK_NEAR(v, 25.5e9, 1e-15, 0);
    CHECK(kv_parse_rate("4 GiB/s", &v, &e) == 0);
    CHECK_NEAR(v, 4294967296.0, 0, 0);
    CHECK(kv_parse_rate("10 Gbps", &v, &e) == 0);
    CHECK_NEAR(v, 1.25e9, 0, 0);
    CHECK(kv_parse_rate("10 Gb/s", &v, &e) == 0);
    CHECK_NEAR(v, 1.25e9, 0, 0);
    CHECK(kv_parse_rate("800 Mbps", &v, &e) == 0);
    CHECK_NEAR(v, 1e8, 0, 0);
    CHECK(kv_parse_rate("1.5 TB/s", &v, &e) == 0);
    CHECK_NEAR(v, 1.5e12, 0, 0);
    CHECK(kv_parse_rate("100 MB/s", &v, &e) == 0);
    CHECK_NEAR(v, 1e8, 0, 0);
    CHECK(kv_parse_rate("32 Gib/s", &v, &e) == 0); /* Cake's binary "32 Gbps" = 4 GiB/s */
    CHECK_NEAR(v, 4294967296.0, 0, 0);
    CHECK(kv_parse_rate("512 KiB/s", &v, &e) == 0);
    CHECK_NEAR(v, 524288.0, 0, 0);
    CHECK(kv_parse_rate("25.5GB/s", &v, &e) == 0); /* no space */
    CHECK_NEAR(v, 25.5e9, 1e-15, 0);
    CHECK(kv_parse_rate("  7 Gbps \t", &v, &e) == 0); /* surrounding whitespace */
    CHECK_NEAR(v, 0.875e9, 0, 0);
    CHECK(kv_parse_rate("1e3 MB/s", &v, &e) == 0); /* exponent */
    CHECK_NEAR(v, 1e9, 0, 0);
    CHECK(kv_parse_rate(".5 kB/s", &v, &e) == 0);
    CHECK_NEAR(v, 500.0, 0, 0);
    CHECK(kv_parse_rate("0 GB/s", &v, &e) == 0);
    CHECK_NEAR(v, 0.0, 0, 0);
}

/* A failing parse leaves the output alone and names the text and the accepted units. */
TEST(units_rate_errors)
{
    KvErr e = {{0}};
    double v = 42;
    CHECK(kv_parse_rate("25.5", &v, &e) == -1); /* bare number */
    CHECK_CONTAINS(e.msg, "got \"25.5\"");
    CHECK_CONTAINS(e.msg, "no unit");
    CHECK_CONTAINS(e.msg, "GB/s");
    CHECK_CONTAINS(e.msg, "GiB/s");
    CHECK_CONTAINS(e.msg, "Gbps");
    CHECK_CONTAINS(e.msg, "expected a rate with a unit such as \"25.5 GB/s\"");
    CHECK(v == 42);
    CHECK(kv_parse_rate("25 GB", &v, &e) == -1); /* a size is not a rate */
    CHECK_CONTAINS(e.msg, "unknown unit \"GB\"");
    CHECK(kv_parse_rate("25 gb/s", &v, &e) == -1); /* case carries meaning: bytes vs bits */
    CHECK_CONTAINS(e.msg, "unknown unit \"gb/s\"");
    CHECK(kv_parse_rate("fast GB/s", &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "no number");
    CHECK(kv_parse_rate("-5 GB/s", &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "negative");
    CHECK(kv_parse_rate("", &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "got \"\"");
    CHECK(kv_parse_rate(NULL, &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "got nothing");
    CHECK(kv_parse_rate("nan GB/s", &v, &e) == -1);
    CHECK(kv_parse_rate("inf GB/s", &v, &e) == -1);
    CHECK(kv_parse_rate("0x10 GB/s", &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "unknown unit \"x10 GB/s\"");
    CHECK(kv_parse_rate("1.2.3 GB/s", &v, &e) == -1);
    CHECK(kv_parse_rate("1e999999 GB/s", &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "out of range");
    CHECK(kv_parse_rate("10 Gbps extra", &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "unknown unit \"Gbps extra\"");
    CHECK(v == 42);
}

TEST(units_rate_error_quotes_long_text_shortened)
{
    KvErr e = {{0}};
    double v;
    char longtext[300];
    memset(longtext, '7', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = '\0';
    CHECK(kv_parse_rate(longtext, &v, &e) == -1);
    CHECK_CONTAINS(e.msg, "...\"");
    CHECK(strlen(e.msg) < sizeof e.msg - 1);
}

TEST(units_size_forms)
{
    KvErr e = {{0}};
    uint64_t b = 0;
    CHECK(kv_parse_size("40 GB", &b, &e) == 0);
    CHECK_EQ_U(b, 40000000000ull);
    CHECK(kv_parse_size("141 GB", &b, &e) == 0);
    CHECK_EQ_U(b, 141000000000ull);
    CHECK(kv_parse_size("256 GiB", &b, &e) == 0);
    CHECK_EQ_U(b, 274877906944ull);
    CHECK(kv_parse_size("64 KiB", &b, &e) == 0);
    CHECK_EQ_U(b, 65536);
    CHECK(kv_parse_size("512 B", &b, &e) == 0);
    CHECK_EQ_U(b, 512);
    CHECK(kv_parse_size("7.68 TB", &b, &e) == 0); /* 7.68 is not exact in binary: must round */
    CHECK_EQ_U(b, 7680000000000ull);
    CHECK(kv_parse_size("1.5 KiB", &b, &e) == 0);
    CHECK_EQ_U(b, 1536);
    CHECK(kv_parse_size("1 kB", &b, &e) == 0);
    CHECK_EQ_U(b, 1000);
    CHECK(kv_parse_size("1 KB", &b, &e) == 0);
    CHECK_EQ_U(b, 1000);
    CHECK(kv_parse_size("2 TB", &b, &e) == 0);
    CHECK_EQ_U(b, 2000000000000ull);
    CHECK(kv_parse_size("1 PiB", &b, &e) == 0);
    CHECK_EQ_U(b, 1125899906842624ull);
    CHECK(kv_parse_size("0.1 GB", &b, &e) == 0);
    CHECK_EQ_U(b, 100000000ull);
    CHECK(kv_parse_size("0 B", &b, &e) == 0);
    CHECK_EQ_U(b, 0);
}

TEST(units_size_errors)
{
    KvErr e = {{0}};
    uint64_t b = 7;
    CHECK(kv_parse_size("80", &b, &e) == -1);
    CHECK_CONTAINS(e.msg, "expected a size with a unit such as \"80 GB\", got \"80\"");
    CHECK_CONTAINS(e.msg, "GiB");
    CHECK_CONTAINS(e.msg, "KiB");
    CHECK(kv_parse_size("80 GB/s", &b, &e) == -1); /* a rate is not a size */
    CHECK_CONTAINS(e.msg, "unknown unit \"GB/s\"");
    CHECK(kv_parse_size("100000 PB", &b, &e) == -1); /* 1e20 bytes > 2^64 */
    CHECK_CONTAINS(e.msg, "out of range");
    CHECK(kv_parse_size("-1 GB", &b, &e) == -1);
    CHECK_CONTAINS(e.msg, "negative");
    CHECK(kv_parse_size("GB", &b, &e) == -1);
    CHECK_CONTAINS(e.msg, "no number");
    CHECK(b == 7);
}

TEST(units_duration_forms)
{
    KvErr e = {{0}};
    int64_t ns = 0;
    CHECK(kv_parse_duration("5 us", &ns, &e) == 0);
    CHECK_EQ_I(ns, 5000);
    CHECK(kv_parse_duration("5 \xC2\xB5s", &ns, &e) == 0); /* µ, MICRO SIGN */
    CHECK_EQ_I(ns, 5000);
    CHECK(kv_parse_duration("5 \xCE\xBCs", &ns, &e) == 0); /* μ, GREEK SMALL LETTER MU */
    CHECK_EQ_I(ns, 5000);
    CHECK(kv_parse_duration("0.5 ms", &ns, &e) == 0);
    CHECK_EQ_I(ns, 500000);
    CHECK(kv_parse_duration("30 s", &ns, &e) == 0);
    CHECK_EQ_I(ns, 30000000000ll);
    CHECK(kv_parse_duration("120 ns", &ns, &e) == 0);
    CHECK_EQ_I(ns, 120);
    CHECK(kv_parse_duration("2 min", &ns, &e) == 0);
    CHECK_EQ_I(ns, 120000000000ll);
    CHECK(kv_parse_duration("1 h", &ns, &e) == 0);
    CHECK_EQ_I(ns, 3600000000000ll);
    CHECK(kv_parse_duration("1.4 ns", &ns, &e) == 0); /* rounded to the nearest ns */
    CHECK_EQ_I(ns, 1);
    CHECK(kv_parse_duration("1.6 ns", &ns, &e) == 0);
    CHECK_EQ_I(ns, 2);
}

TEST(units_duration_errors)
{
    KvErr e = {{0}};
    int64_t ns = 3;
    CHECK(kv_parse_duration("30", &ns, &e) == -1);
    CHECK_CONTAINS(e.msg, "expected a duration with a unit such as \"5 us\", got \"30\"");
    CHECK_CONTAINS(e.msg, "ms");
    CHECK_CONTAINS(e.msg, "min");
    CHECK(kv_parse_duration("30 sec", &ns, &e) == -1);
    CHECK_CONTAINS(e.msg, "unknown unit \"sec\"");
    CHECK(kv_parse_duration("1e10 h", &ns, &e) == -1); /* 3.6e22 ns > 2^63 */
    CHECK_CONTAINS(e.msg, "out of range");
    CHECK(kv_parse_duration("-2 ms", &ns, &e) == -1);
    CHECK_CONTAINS(e.msg, "negative");
    CHECK(ns == 3);
}

TEST(units_flops)
{
    KvErr e = {{0}};
    double f = 0;
    CHECK(kv_parse_flops("312 TFLOP/s", &f, &e) == 0);
    CHECK_NEAR(f, 312e12, 0, 0);
    CHECK(kv_parse_flops("165.2 TFLOP/s", &f, &e) == 0);
    CHECK_NEAR(f, 165.2e12, 1e-15, 0);
    CHECK(kv_parse_flops("1.5 PFLOP/s", &f, &e) == 0);
    CHECK_NEAR(f, 1.5e15, 0, 0);
    CHECK(kv_parse_flops("989 TFLOPS", &f, &e) == 0);
    CHECK_NEAR(f, 989e12, 0, 0);
    CHECK(kv_parse_flops("19.5 GFLOP/s", &f, &e) == 0);
    CHECK_NEAR(f, 19.5e9, 1e-15, 0);
    CHECK(kv_parse_flops("312", &f, &e) == -1);
    CHECK_CONTAINS(e.msg, "got \"312\"");
    CHECK_CONTAINS(e.msg, "TFLOP/s");
    CHECK(kv_parse_flops("312 TB/s", &f, &e) == -1);
    CHECK_CONTAINS(e.msg, "unknown unit \"TB/s\"");
}

TEST(units_format)
{
    char b[64];
    kv_fmt_rate(b, sizeof b, 25.5e9);
    CHECK_STR(b, "25.50 GB/s");
    kv_fmt_rate(b, sizeof b, 999.999e6); /* rounds to 1000.00 MB/s: printed in the next unit */
    CHECK_STR(b, "1.00 GB/s");
    kv_fmt_rate(b, sizeof b, 512);
    CHECK_STR(b, "512.00 B/s");
    kv_fmt_size(b, sizeof b, 1.07e9);
    CHECK_STR(b, "1.07 GB");
    kv_fmt_size(b, sizeof b, 512);
    CHECK_STR(b, "512 B");
    kv_fmt_size(b, sizeof b, 7.68e12);
    CHECK_STR(b, "7.68 TB");
    kv_fmt_duration(b, sizeof b, 12.3e6);
    CHECK_STR(b, "12.3 ms");
    kv_fmt_duration(b, sizeof b, 120);
    CHECK_STR(b, "120 ns");
    kv_fmt_duration(b, sizeof b, 5000);
    CHECK_STR(b, "5.00 us");
    kv_fmt_duration(b, sizeof b, 999.9e6); /* 999.9 ms -> "1000 ms" would be wrong: 1.00 s */
    CHECK_STR(b, "1.00 s");
    kv_fmt_duration(b, sizeof b, 3600e9);
    CHECK_STR(b, "3600 s");
    kv_fmt_duration(b, sizeof b, -2.5e6);
    CHECK_STR(b, "-2.50 ms");
    kv_fmt_flops(b, sizeof b, 312e12);
    CHECK_STR(b, "312.0 TFLOP/s");
    kv_fmt_rate(b, sizeof b, NAN);
    CHECK_STR(b, "nan B/s");
    /* tiny buffers are truncated, never overrun */
    char small[5] = "xxxx";
    kv_fmt_rate(small, sizeof small, 25.5e9);
    CHECK_STR(small, "25.5");
    kv_fmt_rate(small, 0, 25.5e9);
    CHECK_STR(small, "25.5");
}

/* What the formatter prints, the parser reads back (within the printed precision). */
TEST(units_format_parses_back)
{
    KvErr e = {{0}};
    const double rates[] = {1.17e9, 25.5e9, 3.35e12, 800e3};
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++) {
        char b[64];
        double v = 0;
        kv_fmt_rate(b, sizeof b, rates[i]);
        CHECK_MSG(kv_parse_rate(b, &v, &e) == 0, "%s: %s", b, e.msg);
        CHECK_NEAR(v, rates[i], 0.005, 0);
    }
    char b[64];
    uint64_t bytes = 0;
    kv_fmt_size(b, sizeof b, 256e9);
    CHECK(kv_parse_size(b, &bytes, &e) == 0);
    CHECK_EQ_U(bytes, 256000000000ull);
    int64_t ns = 0;
    kv_fmt_duration(b, sizeof b, 70e3);
    CHECK(kv_parse_duration(b, &ns, &e) == 0);
    CHECK_EQ_I(ns, 70000);
}
