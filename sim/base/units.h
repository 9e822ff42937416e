/* units.h — quantities with explicit units, as written in configs and on the command line.
 *
 *  rates:     "25.5 GB/s" (1e9 B/s), "4 GiB/s" (2^30 B/s), "10 Gbps" / "10 Gb/s" (1e9 bit/s),
 *             "100 MB/s", "1.5 TB/s", "800 Mbps"; a bare number is refused (units must be explicit).
 *  sizes:     "40 GB", "141 GB", "256 GiB", "64 KiB", "512 B", "7.68 TB".
 *  durations: "5 us", "0.5 ms", "30 s", "120 ns", "1 h", "2 min".
 *  FLOP/s:    "312 TFLOP/s", "1.5 PFLOP/s", "989 TFLOPS" (compute peaks in the hardware catalog).
 * Unit names are case-sensitive where case carries meaning (GB/s bytes vs Gb/s bits); the kilo
 * prefix may be written k or K; "us", "µs" (U+00B5) and "μs" (U+03BC) are all microseconds.
 * Whitespace between number and unit is optional; negative, NaN, infinite and hexadecimal
 * numbers are refused, as are results that overflow the output type.
 * Results: bytes per second (double), bytes (uint64_t, rounded to nearest), nanoseconds (int64_t).
 * Errors name the text and list the accepted units.
 */
#ifndef KV_UNITS_H
#define KV_UNITS_H

#include <stdint.h>

#include "sim/base/util.h"

int kv_parse_rate(const char *s, double *bytes_per_s, KvErr *e);
int kv_parse_size(const char *s, uint64_t *bytes, KvErr *e);
int kv_parse_duration(const char *s, int64_t *ns, KvErr *e);
int kv_parse_flops(const char *s, double *flops_per_s, KvErr *e);

/* Human-readable forms for tables: "25.50 GB/s", "1.07 GB", "12.3 ms". */
void kv_fmt_rate(char *buf, int len, double bytes_per_s);
void kv_fmt_size(char *buf, int len, double bytes);
void kv_fmt_duration(char *buf, int len, double ns);
void kv_fmt_flops(char *buf, int len, double flops_per_s); /* "312.0 TFLOP/s" */

#endif
