/* fuzz_trace_common.h — one trace format read to the end from fuzzed bytes (used by fuzz_trace_*.c).
 *
 * Responsible for: opening the bytes as a file in the given format with options drawn from nothing
 * but the format (fixed seed, max_context on, a request cap so one input stays fast), reading every
 * request and checking the contract trace.h promises for what comes out (token invariants and limits,
 * arrivals non-decreasing, dense session ids). A violation aborts, which libFuzzer reports.
 * Not responsible for: the meaning of any field (the unit tests check that).
 */
#ifndef KV_FUZZ_TRACE_COMMON_H
#define KV_FUZZ_TRACE_COMMON_H

#include "tests/fuzz/fuzz_common.h"
#include "traces/trace.h"

static inline void fuzz_trace_run(const char *name, const char *suffix, const char *format, const uint8_t *data,
                                  size_t size)
{
    const char *path = fuzz_file(name, suffix, data, size);
    for (int pass = 0; pass < 2; pass++) {
        TraceOptions o;
        memset(&o, 0, sizeof o);
        o.source = path;
        o.format = pass == 0 ? format : "auto";
        o.seed = 7;
        o.max_requests = 20000;
        o.max_context_tokens = pass == 0 ? 0 : 4096;
        o.think_ns = pass == 0 ? 0 : 1000000000;
        KvErr e = {{0}};
        TraceSource *s = trace_open(&o, &e);
        if (!s) {
            if (!e.msg[0]) abort(); /* every failure carries a message */
            continue;
        }
        TraceRequest r;
        int rc;
        int64_t last = 0;
        uint64_t max_session = 0;
        int64_t n = 0;
        while ((rc = trace_next(s, &r, &e)) == 1) {
            if (r.new_input_tokens < 1 || r.output_tokens < 1 || r.history_tokens < 0) abort();
            if (r.new_input_tokens + r.output_tokens + r.history_tokens > TRACE_MAX_TOKENS) abort();
            if (o.max_context_tokens && r.new_input_tokens + r.history_tokens > o.max_context_tokens) abort();
            if (r.arrival_ns >= 0) {
                if (r.arrival_ns < last || r.arrival_ns > TRACE_MAX_TIME_NS) abort();
                last = r.arrival_ns;
            } else if (r.arrival_ns != -1 || r.turn == 0 || r.think_ns < 0 || r.think_ns > TRACE_MAX_THINK_NS) {
                abort();
            }
            if (r.session > max_session + 1 || (n == 0 && r.session != 0)) abort(); /* dense, in order */
            if (r.session > max_session) max_session = r.session;
            n++;
        }
        if (rc < 0 && !e.msg[0]) abort();
        if (trace_emitted_count(s) != n) abort();
        (void)trace_describe(s);
        trace_close(s);
    }
}

#endif
