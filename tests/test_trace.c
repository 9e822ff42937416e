/* test_trace.c — traces/: loaders (canonical CSV, Mooncake JSONL, Vidur CSV), the release-order
 * contract, the arrival process, truncation, the generators' fitted statistics and determinism, the
 * deterministic random numbers, streaming memory, and every error path the loaders have.
 *
 * Real files (traces/data/, SKIP when absent): row counts, exact rows, order over the whole
 * stream, and means within 0.5 % of SOURCES.md. Fixtures: tests/fixtures/traces/ (see its README)
 * and small files written per test. Expected values are hand-computed in the comments.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tests/harness.h"
#include "traces/trace.h"
#include "traces/trace_int.h"

/* ---------------------------------------------------------------- helpers */

static TraceOptions topts(const char *source)
{
    TraceOptions o;
    memset(&o, 0, sizeof o);
    o.source = source;
    o.seed = 1;
    return o;
}

typedef struct Reqs {
    TraceRequest *r;
    size_t n, cap;
} Reqs;

/* Read the whole stream (up to limit) into a growing array; returns the trace_next status at the end. */
static int read_all(TraceSource *s, Reqs *out, size_t limit, KvErr *e)
{
    memset(out, 0, sizeof *out);
    for (;;) {
        if (out->n == limit) return 0;
        if (out->n == out->cap) {
            out->cap = out->cap ? out->cap * 2 : 256;
            out->r = realloc(out->r, out->cap * sizeof *out->r);
        }
        int rc = trace_next(s, &out->r[out->n], e);
        if (rc <= 0) return rc;
        out->n++;
    }
}

/* Open source with o, read it all; NULL-safe. */
static Reqs load(TestCtx *t, const TraceOptions *o)
{
    KvErr e = {{0}};
    Reqs q = {0};
    TraceSource *s = trace_open(o, &e);
    CHECK_MSG(s != NULL, "open %s: %s", o->source, e.msg);
    if (!s) return q;
    int rc = read_all(s, &q, (size_t)-1, &e);
    CHECK_MSG(rc == 0, "read %s: %s", o->source, e.msg);
    trace_close(s);
    return q;
}

/* Streaming check of the order contract and the token invariants. Returns the number of sessions. */
typedef struct OrderCheck {
    int64_t last_arrival;
    int32_t *max_turn; /* by session, -1 = unseen */
    size_t cap;
    uint64_t sessions;
    int64_t bad;
} OrderCheck;

static void order_feed(TestCtx *t, OrderCheck *c, const TraceRequest *r, int64_t i)
{
    int ok = 1;
    if (r->session > c->sessions) ok = 0; /* dense: a new session is exactly the next id */
    if (r->session == c->sessions) {
        if (c->sessions == c->cap) {
            c->cap = c->cap ? c->cap * 2 : 1024;
            c->max_turn = realloc(c->max_turn, c->cap * sizeof *c->max_turn);
        }
        c->max_turn[c->sessions++] = -1;
    }
    if (ok) {
        int32_t m = c->max_turn[r->session];
        if (m < 0 && r->turn != 0) ok = 0;
        if (m >= 0 && (r->turn < 1 || r->turn > m + 1)) ok = 0;
        if (r->turn > m) c->max_turn[r->session] = r->turn;
    }
    if (r->arrival_ns >= 0) {
        if (r->arrival_ns < c->last_arrival) ok = 0;
        c->last_arrival = r->arrival_ns;
    } else if (r->arrival_ns != -1 || r->turn == 0 || r->think_ns < 0) {
        ok = 0;
    }
    if (r->new_input_tokens < 1 || r->output_tokens < 1 || r->history_tokens < 0) ok = 0;
    if (!ok && c->bad++ < 3)
        harness_fail(t, __FILE__, __LINE__, "order/invariant broken at request %lld: session %llu turn %d arrival %lld",
                     (long long)i, (unsigned long long)r->session, r->turn, (long long)r->arrival_ns);
}

static void order_check_all(TestCtx *t, const Reqs *q)
{
    OrderCheck c = {0};
    for (size_t i = 0; i < q->n; i++) order_feed(t, &c, &q->r[i], (int64_t)i);
    CHECK_EQ_I(c.bad, 0);
    free(c.max_turn);
}

static int req_equal(const TraceRequest *a, const TraceRequest *b)
{
    return a->session == b->session && a->turn == b->turn && a->arrival_ns == b->arrival_ns &&
           a->think_ns == b->think_ns && a->new_input_tokens == b->new_input_tokens &&
           a->output_tokens == b->output_tokens && a->history_tokens == b->history_tokens;
}

#define CHECK_REQ(q, sess, trn, arr, think, nw, out, hist)                                                  \
    do {                                                                                                    \
        const TraceRequest *r_ = (q);                                                                       \
        CHECK_EQ_U(r_->session, sess);                                                                      \
        CHECK_EQ_I(r_->turn, trn);                                                                          \
        CHECK_EQ_I(r_->arrival_ns, arr);                                                                    \
        CHECK_EQ_I(r_->think_ns, think);                                                                    \
        CHECK_EQ_I(r_->new_input_tokens, nw);                                                               \
        CHECK_EQ_I(r_->output_tokens, out);                                                                 \
        CHECK_EQ_I(r_->history_tokens, hist);                                                               \
    } while (0)

/* Open must fail and the message must contain every given fragment. */
static void expect_open_error(TestCtx *t, const TraceOptions *o, const char *frag1, const char *frag2)
{
    KvErr e = {{0}};
    TraceSource *s = trace_open(o, &e);
    CHECK_MSG(s == NULL, "open %s should fail (%s)", o->source, frag1);
    trace_close(s);
    CHECK_CONTAINS(e.msg, frag1);
    if (frag2) CHECK_CONTAINS(e.msg, frag2);
}

static int file_exists(const char *p) { return access(p, R_OK) == 0; }

typedef struct Means {
    double new_in, out, hist;
} Means;

static Means means_of(const Reqs *q)
{
    Means m = {0, 0, 0};
    for (size_t i = 0; i < q->n; i++) {
        m.new_in += (double)q->r[i].new_input_tokens;
        m.out += (double)q->r[i].output_tokens;
        m.hist += (double)q->r[i].history_tokens;
    }
    if (q->n) {
        m.new_in /= (double)q->n;
        m.out /= (double)q->n;
        m.hist /= (double)q->n;
    }
    return m;
}

/* ---------------------------------------------------------------- random numbers */

TEST(trace_rng_golden_values)
{
    /* xoshiro256** seeded by splitmix64(seed ^ stream·0xD1B54A32D192ED03); values computed
     * independently in Python: the stream must be the same on every machine */
    TraceRng r;
    trace_rng_seed(&r, 1, 1);
    CHECK_EQ_U(trace_rng_u64(&r), 0xbaa24e21d05c2935ull);
    CHECK_EQ_U(trace_rng_u64(&r), 0x19ac350577648864ull);
    CHECK_EQ_U(trace_rng_u64(&r), 0x7ef054b7f95a306aull);
    trace_rng_seed(&r, 12345, 0x5E55);
    CHECK_EQ_U(trace_rng_u64(&r), 0x63892b796d9d735cull);
    CHECK_EQ_U(trace_rng_u64(&r), 0x542b0d3402940df9ull);
}

TEST(trace_rng_ln_exp_match_libm)
{
    double worst_ln = 0, worst_exp = 0;
    for (int i = -2000; i <= 2000; i++) {
        double x = pow(10.0, i / 100.0) * (1.0 + 0.37 * ((i * 7919) % 101) / 101.0);
        double a = trace_ln(x), b = log(x);
        double err = fabs(a - b) / fmax(fabs(b), 1e-300);
        if (b != 0 && err > worst_ln) worst_ln = err;
        double y = i / 7.0;
        double c = trace_exp(y), d = exp(y);
        double err2 = fabs(c - d) / d;
        if (err2 > worst_exp) worst_exp = err2;
    }
    CHECK_MSG(worst_ln < 4e-15, "trace_ln worst relative error %g", worst_ln);
    CHECK_MSG(worst_exp < 4e-15, "trace_exp worst relative error %g", worst_exp);
    CHECK(trace_ln(1.0) == 0.0);
    CHECK(trace_exp(0.0) == 1.0);
    CHECK(isinf(trace_ln(0.0)) && trace_ln(0.0) < 0);
    CHECK(isnan(trace_ln(-1.0)));
    CHECK(trace_exp(-800.0) == 0.0);
    CHECK(isinf(trace_exp(800.0)));
    /* rounding to tokens: nearest, clamped, NaN to lo */
    CHECK_EQ_I(trace_tokens(2.5, 1, 10), 3);
    CHECK_EQ_I(trace_tokens(2.49, 1, 10), 2);
    CHECK_EQ_I(trace_tokens(0.2, 1, 10), 1);
    CHECK_EQ_I(trace_tokens(1e30, 1, 10), 10);
    CHECK_EQ_I(trace_tokens(NAN, 1, 10), 1);
    CHECK_EQ_I(trace_ns_from_s(1.5, 2.0), 3000000000LL);
    CHECK_EQ_I(trace_ns_from_s(-1.0, 1.0), -1);
    CHECK_EQ_I(trace_ns_from_s(1e12, 1e3), -1);
    CHECK_EQ_I(trace_scale_ns(7, 1.0), 7);
    CHECK_EQ_I(trace_scale_ns(7, 0.5), 4); /* 3.5 rounds up */
    CHECK_EQ_I(trace_scale_ns(INT64_MAX / 2, 4.0), -1);
}

TEST(trace_rng_distributions)
{
    TraceRng r;
    trace_rng_seed(&r, 7, 3);
    const int n = 200000;
    double su = 0, sn = 0, sn2 = 0, se = 0, sl = 0;
    double umin = 1, umax = 0;
    for (int i = 0; i < n; i++) {
        double u = trace_rng_uniform(&r);
        umin = fmin(umin, u);
        umax = fmax(umax, u);
        su += u;
        double z = trace_rng_normal(&r);
        sn += z;
        sn2 += z * z;
        se += trace_rng_exponential(&r, 4.0);
        sl += trace_rng_lognormal(&r, 1.0, 0.5);
    }
    CHECK(umin > 0.0 && umax < 1.0);
    CHECK_NEAR(su / n, 0.5, 0, 0.005);
    CHECK_NEAR(sn / n, 0.0, 0, 0.01);
    CHECK_NEAR(sn2 / n, 1.0, 0.01, 0);
    CHECK_NEAR(se / n, 0.25, 0.01, 0);
    CHECK_NEAR(sl / n, exp(1.0 + 0.125), 0.01, 0); /* lognormal mean e^(mu + sigma^2/2) */
}

/* ---------------------------------------------------------------- CSV field helpers */

TEST(trace_csv_split_and_numbers)
{
    char line[] = " a , \"b, c\" ,\"say \"\"hi\"\"\",,x";
    char *f[8];
    CHECK_EQ_I(trace_csv_split(line, f, 8), 5);
    CHECK_STR(f[0], "a");
    CHECK_STR(f[1], "b, c");
    CHECK_STR(f[2], "say \"hi\"");
    CHECK_STR(f[3], "");
    CHECK_STR(f[4], "x");
    char bad[] = "a,\"open";
    CHECK_EQ_I(trace_csv_split(bad, f, 8), -1);
    char bad2[] = "a,\"q\"x,b";
    CHECK_EQ_I(trace_csv_split(bad2, f, 8), -1);
    char many[] = "1,2,3,4";
    CHECK_EQ_I(trace_csv_split(many, f, 2), 4); /* counts all, stores 2 */
    int64_t v;
    CHECK(trace_parse_count(" 42 ", &v) == 0 && v == 42);
    CHECK(trace_parse_count("-5", &v) < 0);
    CHECK(trace_parse_count("4.0", &v) < 0);
    CHECK(trace_parse_count("", &v) < 0);
    CHECK(trace_parse_count("99999999999999999999", &v) < 0);
    double d;
    CHECK(trace_parse_seconds("3.25", &d) == 0 && d == 3.25);
    CHECK(trace_parse_seconds(".5", &d) == 0 && d == 0.5);
    CHECK(trace_parse_seconds("-1", &d) < 0);
    CHECK(trace_parse_seconds("inf", &d) < 0);
    CHECK(trace_parse_seconds("1s", &d) < 0);
    CHECK(trace_parse_seconds("0x10", &d) < 0);
    CHECK(trace_parse_seconds("1e3", &d) == 0 && d == 1000.0);
    TraceNames m = {0};
    int is_new;
    char name[32];
    for (int i = 0; i < 1000; i++) {
        snprintf(name, sizeof name, "s%d", i);
        CHECK_EQ_I(trace_names_intern(&m, name, &is_new), i);
        CHECK(is_new);
    }
    CHECK_EQ_I(trace_names_intern(&m, "s517", &is_new), 517);
    CHECK(!is_new);
    trace_names_free(&m);
}

/* ---------------------------------------------------------------- canonical CSV fixtures */

/* sorted.csv and grouped.csv, by hand:
 *   a0 0.5 s 100/10/0; b0 1.0 s 200/20/0; b1 closed loop 40/4/220; a1 2.0 s 30/5/110;
 *   c0 2.0 s 7/3/0; a2 3.25 s new 0 → 1 (history 145 → 144), output 0 → 1 */
static void check_fixture_stream(TestCtx *t, const Reqs *q, double scale, int64_t think_ns)
{
    CHECK_EQ_U(q->n, 6);
    if (q->n != 6) return;
    int64_t s = (int64_t)llround(scale * 1e9);
    CHECK_REQ(&q->r[0], 0, 0, s / 2, 0, 100, 10, 0);
    CHECK_REQ(&q->r[1], 1, 0, s, 0, 200, 20, 0);
    CHECK_REQ(&q->r[2], 1, 1, -1, think_ns, 40, 4, 220);
    CHECK_REQ(&q->r[3], 0, 1, 2 * s, 0, 30, 5, 110);
    CHECK_REQ(&q->r[4], 2, 0, 2 * s, 0, 7, 3, 0);
    CHECK_REQ(&q->r[5], 0, 2, (int64_t)llround(3.25 * scale * 1e9), 0, 1, 1, 144);
}

TEST(trace_csv_fixture_sorted_streams)
{
    TraceOptions o = topts(test_path("tests/fixtures/traces/sorted.csv"));
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "streamed in file order");
    CHECK_CONTAINS(trace_describe(s), "6 rows, 3 sessions");
    CHECK_CONTAINS(trace_describe(s), "5 timestamped");
    Reqs q;
    CHECK(read_all(s, &q, 100, &e) == 0);
    check_fixture_stream(t, &q, 1.0, 0);
    order_check_all(t, &q);
    TraceRequest r;
    CHECK_EQ_I(trace_next(s, &r, &e), 0); /* stays at end */
    CHECK_EQ_I(trace_emitted_count(s), 6);
    CHECK_EQ_I(trace_truncated_count(s), 0);
    free(q.r);
    trace_close(s);
}

TEST(trace_csv_out_of_order_file_uses_index_same_stream)
{
    TraceOptions o = topts(test_path("tests/fixtures/traces/grouped.csv"));
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "indexed (out of release order from line 5)");
    Reqs q;
    CHECK(read_all(s, &q, 100, &e) == 0);
    trace_close(s);
    check_fixture_stream(t, &q, 1.0, 0);
    Reqs p = load(t, &(TraceOptions){.source = test_path("tests/fixtures/traces/sorted.csv"), .seed = 1});
    CHECK_EQ_U(p.n, q.n);
    for (size_t i = 0; i < p.n && i < q.n; i++) CHECK_MSG(req_equal(&p.r[i], &q.r[i]), "request %zu differs", i);
    free(p.r);
    free(q.r);
}

TEST(trace_csv_reordered_columns_extra_columns_crlf)
{
    /* the sorted fixture with columns shuffled, two unknown columns, CRLF ends, a BOM, a blank line */
    const char *text =
        "\xEF\xBB\xBFhistory_tokens,extra,output_tokens,session_id,new_input_tokens,arrival_s,turn,more\r\n"
        "0,x,10,a,100,0.5,0,\r\n"
        "0,y,20,b,200,1.0,0,\"1,2\"\r\n"
        "220,,4,b,40,,1,\r\n"
        "\r\n"
        "110,,5,a,30,2.0,1,\r\n"
        "0,,3,c,7,2.0,0,\r\n"
        "145,,0,a,0,3.25,2,\r\n";
    TraceOptions o = topts(test_write_file(t, "reordered.csv", text));
    Reqs q = load(t, &o);
    check_fixture_stream(t, &q, 1.0, 0);
    free(q.r);
}

TEST(trace_csv_time_scale_and_think)
{
    TraceOptions o = topts(test_path("tests/fixtures/traces/sorted.csv"));
    o.time_scale = 2.0;
    o.think_ns = 5000000000LL;
    Reqs q = load(t, &o);
    check_fixture_stream(t, &q, 2.0, 10000000000LL); /* think 5 s × 2 */
    free(q.r);
    o.time_scale = 0.001;
    o.think_ns = 0;
    q = load(t, &o);
    check_fixture_stream(t, &q, 0.001, 0);
    free(q.r);
}

TEST(trace_csv_max_context_and_max_requests)
{
    TraceOptions o = topts(test_path("tests/fixtures/traces/sorted.csv"));
    o.max_context_tokens = 150;
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK(s != NULL);
    if (!s) return;
    Reqs q;
    CHECK(read_all(s, &q, 100, &e) == 0);
    /* b0 (200 new > 150) → new 150, history 0; b1 (40 + 220 = 260 > 150) → new 40, history 110 */
    CHECK_EQ_U(q.n, 6);
    if (q.n == 6) {
        CHECK_EQ_I(q.r[1].new_input_tokens, 150);
        CHECK_EQ_I(q.r[1].history_tokens, 0);
        CHECK_EQ_I(q.r[2].new_input_tokens, 40);
        CHECK_EQ_I(q.r[2].history_tokens, 110);
        CHECK_EQ_I(q.r[3].history_tokens, 110); /* a1: 30 + 110 = 140 fits */
    }
    CHECK_EQ_I(trace_truncated_count(s), 2);
    free(q.r);
    trace_close(s);
    /* max 20: a0 new 100 → 20 history 0; b0 200 → 20; b1 → 20/0; a1 → 20/0; c0 7+0 fits; a2 1+144 → 1/19 */
    o.max_context_tokens = 20;
    s = trace_open(&o, &e);
    CHECK(read_all(s, &q, 100, &e) == 0);
    CHECK_EQ_I(trace_truncated_count(s), 5);
    if (q.n == 6) {
        CHECK_EQ_I(q.r[0].new_input_tokens, 20);
        CHECK_EQ_I(q.r[0].history_tokens, 0);
        CHECK_EQ_I(q.r[4].new_input_tokens, 7);
        CHECK_EQ_I(q.r[5].new_input_tokens, 1);
        CHECK_EQ_I(q.r[5].history_tokens, 19);
    }
    free(q.r);
    trace_close(s);
    o.max_context_tokens = 0;
    o.max_requests = 3;
    s = trace_open(&o, &e);
    CHECK_CONTAINS(trace_describe(s), "; max_requests 3; max_context none");
    CHECK(read_all(s, &q, 100, &e) == 0);
    CHECK_EQ_U(q.n, 3);
    free(q.r);
    trace_close(s);
}

TEST(trace_csv_without_timestamps_poisson_sessions)
{
    /* no arrival_s column: turn 0 by Poisson sessions, later turns closed loop back to back */
    const char *text = "session_id,turn,new_input_tokens,output_tokens,history_tokens\n"
                       "x,0,10,1,0\nx,1,5,1,11\ny,0,7,2,0\nz,0,1,1,0\nz,1,1,1,2\n";
    TraceOptions o = topts(test_write_file(t, "nots.csv", text));
    o.seed = 99;
    o.session_rate_per_s = 4.0;
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "3 session starts Poisson 4/s (seed 99)");
    CHECK_CONTAINS(trace_describe(s), "2 closed loop");
    Reqs q;
    CHECK(read_all(s, &q, 100, &e) == 0);
    trace_close(s);
    /* the same Poisson stream, computed here */
    TracePoisson p;
    trace_poisson_init(&p, 99, 4.0);
    int64_t a1 = trace_ns_from_s(trace_poisson_next_s(&p), 1.0);
    int64_t a2 = trace_ns_from_s(trace_poisson_next_s(&p), 1.0);
    int64_t a3 = trace_ns_from_s(trace_poisson_next_s(&p), 1.0);
    CHECK_EQ_U(q.n, 5);
    if (q.n == 5) {
        CHECK_REQ(&q.r[0], 0, 0, a1, 0, 10, 1, 0);
        CHECK_REQ(&q.r[1], 0, 1, -1, 0, 5, 1, 11);
        CHECK_REQ(&q.r[2], 1, 0, a2, 0, 7, 2, 0);
        CHECK_REQ(&q.r[3], 2, 0, a3, 0, 1, 1, 0);
        CHECK_REQ(&q.r[4], 2, 1, -1, 0, 1, 1, 2);
    }
    CHECK(a1 > 0 && a2 > a1 && a3 > a2);
    order_check_all(t, &q);
    free(q.r);
}

TEST(trace_csv_interleaved_closed_loop_and_branch)
{
    /* interleaved sessions without timestamps (closed-loop rows after other sessions' starts) and a
     * branch (turn 1 twice, as in the Mooncake trace): accepted, streamed in file order */
    const char *text = "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                       "a,0,,1,1,0\nb,0,,1,1,0\na,1,,1,1,2\na,1,,1,1,2\nb,1,,2,1,2\na,2,,1,1,4\n";
    TraceOptions o = topts(test_write_file(t, "interleaved.csv", text));
    Reqs q = load(t, &o);
    CHECK_EQ_U(q.n, 6);
    order_check_all(t, &q);
    if (q.n == 6) {
        CHECK_EQ_I(q.r[2].session, 0);
        CHECK_EQ_I(q.r[2].arrival_ns, -1);
        CHECK_EQ_I(q.r[4].session, 1);
        CHECK_EQ_I(q.r[4].new_input_tokens, 2);
    }
    free(q.r);
}

TEST(trace_csv_malformed_rows_name_file_and_line)
{
    const char *hdr = "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n";
    char text[512];
    struct {
        const char *name, *rows, *frag1, *frag2;
    } cases[] = {
        {"nonint.csv", "a,0,0,1,1,0\na,1,1,12x,1,0\n", "nonint.csv: line 3: column new_input_tokens: expected a non-negative integer, got \"12x\"", NULL},
        {"negative.csv", "a,0,0,1,-5,0\n", "negative.csv: line 2: column output_tokens", "got \"-5\""},
        {"neghist.csv", "a,0,0,1,1,-1\n", "line 2: column history_tokens", NULL},
        {"badturn.csv", "a,0,0,1,1,0\na,x,1,1,1,0\n", "badturn.csv: line 3: column turn", NULL},
        {"badarrival.csv", "a,0,soon,1,1,0\n", "badarrival.csv: line 2: column arrival_s", "got \"soon\""},
        {"negarrival.csv", "a,0,-1,1,1,0\n", "line 2: column arrival_s", NULL},
        {"gap.csv", "a,0,0,1,1,0\na,1,1,1,1,2\na,3,2,1,1,4\n", "gap.csv: line 4: session \"a\" jumps to turn 3 after turn 1 (line 3)", NULL},
        {"start.csv", "a,0,0,1,1,0\nb,1,1,1,1,0\n", "start.csv: line 3: session \"b\" starts with turn 1", NULL},
        {"again.csv", "a,0,0,1,1,0\na,0,1,1,1,0\n", "again.csv: line 3: session \"a\" has turn 0 again", NULL},
        {"back.csv", "a,0,5,1,1,0\na,1,4,1,1,2\n", "back.csv: line 3: session \"a\" turn 1: arrival_s 4 is before", NULL},
        {"short.csv", "a,0,0,1,1,0\na,1,1,1\n", "short.csv: line 3: expected 6 columns as in the header, got 4", NULL},
        {"long.csv", "a,0,0,1,1,0,9\n", "long.csv: line 2: expected 6 columns as in the header, got 7", NULL},
        {"quote.csv", "\"a,0,0,1,1,0\n", "quote.csv: line 2: unterminated quoted field", NULL},
        {"nosession.csv", ",0,0,1,1,0\n", "nosession.csv: line 2: column session_id: expected a session id", NULL},
        {"hugeturn.csv", "a,3000000000,0,1,1,0\n", "hugeturn.csv: line 2: column turn", NULL},
        {"hugetime.csv", "a,0,999999999999,1,1,0\n", "hugetime.csv: line 2: column arrival_s", NULL},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        snprintf(text, sizeof text, "%s%s", hdr, cases[i].rows);
        TraceOptions o = topts(test_write_file(t, cases[i].name, text));
        expect_open_error(t, &o, cases[i].frag1, cases[i].frag2);
    }
    /* time scale pushing a valid timestamp past the range */
    snprintf(text, sizeof text, "%sa,0,900000000,1,1,0\n", hdr);
    TraceOptions o = topts(test_write_file(t, "scaled.csv", text));
    o.time_scale = 1e3;
    expect_open_error(t, &o, "scaled.csv: line 2: column arrival_s: value 900000000 s × time_scale 1000 is out of range [0, 4000000000] s", NULL);
}

TEST(trace_csv_bad_headers_and_files)
{
    TraceOptions o = topts(test_write_file(t, "empty.csv", ""));
    o.format = "csv";
    expect_open_error(t, &o, "empty.csv: line 1: empty", NULL);
    o = topts(test_write_file(t, "empty2.csv", ""));
    expect_open_error(t, &o, "empty2.csv: line 1: empty file", NULL); /* auto-detection sees it first */
    o = topts(test_write_file(t, "nohist.csv", "session_id,turn,arrival_s,new_input_tokens,output_tokens\na,0,0,1,1\n"));
    expect_open_error(t, &o, "nohist.csv: line 1: the header has no column history_tokens", NULL);
    o = topts(test_write_file(t, "dup.csv", "session_id,turn,turn,new_input_tokens,output_tokens,history_tokens\n"));
    expect_open_error(t, &o, "dup.csv: line 1: column turn appears twice", NULL);
    o = topts(test_write_file(t, "qhdr.csv", "\"session_id,turn\n"));
    expect_open_error(t, &o, "qhdr.csv: line 1: unterminated quoted field in the header", NULL);
    o = topts(test_path("tests/fixtures/traces/no_such_file.csv"));
    expect_open_error(t, &o, "no_such_file.csv: cannot open", NULL);
    o = topts(test_path("tests/fixtures/traces/no_such_file.csv"));
    o.format = "csv";
    expect_open_error(t, &o, "no_such_file.csv: cannot open", NULL);
    /* a header only: a valid, empty stream */
    o = topts(test_write_file(t, "header_only.csv", "session_id,turn,new_input_tokens,output_tokens,history_tokens\n"));
    Reqs q = load(t, &o);
    CHECK_EQ_U(q.n, 0);
    free(q.r);
}

TEST(trace_csv_file_changed_after_open_fails_and_stays_failed)
{
    const char *good = "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\na,0,0,1,1,0\na,1,1,1,1,2\n";
    TraceOptions o = topts(test_write_file(t, "changing.csv", good));
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK(s != NULL);
    if (!s) return;
    test_write_file(t, "changing.csv", "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\na,0,0,oops,1,0\n");
    TraceRequest r;
    CHECK_EQ_I(trace_next(s, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "changing.csv: line 2: column new_input_tokens");
    KvErr e2;
    CHECK_EQ_I(trace_next(s, &r, &e2), -1); /* sticky, same message */
    CHECK_STR(e2.msg, e.msg);
    trace_close(s);
    /* index path: the file shrinks under it */
    const char *grouped = "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n"
                          "a,0,5,1,1,0\nb,0,1,1,1,0\n";
    o = topts(test_write_file(t, "shrinking.csv", grouped));
    s = trace_open(&o, &e);
    CHECK(s != NULL);
    if (!s) return;
    test_write_file(t, "shrinking.csv", "session_id\n");
    CHECK_EQ_I(trace_next(s, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "shrinking.csv: line 3: the file changed");
    trace_close(s);
}

TEST(trace_time_scale_out_of_range_fails)
{
    /* Poisson session starts of a file without timestamps, scaled past ~292 years */
    TraceOptions o = topts(test_write_file(t, "far.csv", "session_id,turn,new_input_tokens,output_tokens,history_tokens\nx,0,1,1,0\n"));
    o.time_scale = 1e12;
    expect_open_error(t, &o, "far.csv: line 2: Poisson session arrival past the time range", NULL);
    /* a generator fails at the first request, and stays failed */
    o = topts("leval");
    o.time_scale = 1e12;
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    TraceRequest r;
    CHECK_EQ_I(trace_next(s, &r, &e), -1);
    CHECK_CONTAINS(e.msg, "generator leval: session 0 arrives past the time range");
    CHECK_EQ_I(trace_next(s, &r, NULL), -1);
    trace_close(s);
    /* swebench's sampled think time: ~1 ms session gaps × 1e9 fit, a think of > 9 s × 1e9 does not */
    o = topts("swebench");
    o.time_scale = 1e9;
    o.session_rate_per_s = 1e3;
    o.max_requests = 1000;
    s = trace_open(&o, &e);
    CHECK(s != NULL);
    if (!s) return;
    int rc;
    while ((rc = trace_next(s, &r, &e)) == 1) {
    }
    CHECK_EQ_I(rc, -1);
    CHECK_CONTAINS(e.msg, "think time");
    trace_close(s);
}

/* ---------------------------------------------------------------- options */

TEST(trace_options_rejected)
{
    const char *p = test_path("tests/fixtures/traces/sorted.csv");
    TraceOptions o = topts(p);
    o.time_scale = -1;
    expect_open_error(t, &o, "time_scale", NULL);
    o = topts(p);
    o.session_rate_per_s = -2;
    expect_open_error(t, &o, "session_rate_per_s", NULL);
    o = topts(p);
    o.think_ns = -1;
    expect_open_error(t, &o, "think_ns", NULL);
    o = topts(p);
    o.max_requests = -1;
    expect_open_error(t, &o, "max_requests", NULL);
    o = topts(p);
    o.max_context_tokens = -1;
    expect_open_error(t, &o, "max_context_tokens", NULL);
    o = topts(p);
    o.format = "parquet";
    expect_open_error(t, &o, "unknown format \"parquet\"", NULL);
    o = topts(NULL);
    expect_open_error(t, &o, "no source", NULL);
    o = topts("sharegpt4");
    o.format = "csv";
    expect_open_error(t, &o, "is a generator", NULL);
    o = topts(p);
    o.format = "vidur"; /* a canonical CSV read as vidur lacks its columns */
    expect_open_error(t, &o, "has no column num_prefill_tokens", NULL);
    o = topts("sharegpt4");
    o.time_scale = 1e300;
    expect_open_error(t, &o, "think time", NULL);
}

/* ---------------------------------------------------------------- Mooncake JSONL */

/* by hand: r0 t=0 blocks 0,1,2 new → history 0; r1 t=5 ms [0,1] seen → 1024, new 76, output 0 → 1;
 * r2 t=5 ms [0,1] seen → 1024 ≥ input 1024 → capped 1023, new 1; r3 t=12.5 ms [4,...] unseen → 0 */
static void check_mooncake_stream(TestCtx *t, const Reqs *q)
{
    CHECK_EQ_U(q->n, 4);
    if (q->n != 4) return;
    CHECK_REQ(&q->r[0], 0, 0, 0, 0, 1500, 10, 0);
    CHECK_REQ(&q->r[1], 1, 0, 5000000, 0, 76, 1, 1024);
    CHECK_REQ(&q->r[2], 2, 0, 5000000, 0, 1, 4, 1023);
    CHECK_REQ(&q->r[3], 3, 0, 12500000, 0, 600, 3, 0);
}

/* the whole 512-token blocks of each input, by name: r0 (1500 tokens) and r1 (1100) and r2 (1024)
 * have two, ids [0, 1] — the same two names; r3 (600) one, id 4 — another name; a context cut by
 * max_context no longer begins with its blocks: none */
TEST(trace_mooncake_names_its_whole_blocks)
{
    for (int cut = 0; cut < 2; cut++) {
        TraceOptions o = topts(test_path("tests/fixtures/traces/mooncake.jsonl"));
        if (cut) o.max_context_tokens = 1200;
        KvErr e;
        TraceSource *s = trace_open(&o, &e);
        CHECK_MSG(s != NULL, "%s", e.msg);
        if (!s) return;
        static const int32_t want[4] = {2, 2, 2, 1};
        uint64_t first[2] = {0, 0};
        TraceRequest r;
        for (int i = 0; i < 4; i++) {
            CHECK_EQ_I(trace_next(s, &r, &e), 1);
            int32_t n = cut && i == 0 ? 0 : want[i]; /* only r0 (1500 tokens) passes 1200 */
            CHECK_EQ_I(r.n_prefix_blocks, n);
            CHECK_EQ_I(r.prefix_block_tokens, n ? 512 : 0);
            CHECK(n == 0 ? r.prefix_blocks == NULL : r.prefix_blocks != NULL);
            CHECK((int64_t)r.n_prefix_blocks * 512 <= r.history_tokens + r.new_input_tokens);
            if (n == 0) continue;
            for (int k = 0; k < n; k++) CHECK(r.prefix_blocks[k] != 0);
            if (i < 3) {
                if (!first[0]) memcpy(first, r.prefix_blocks, sizeof first);
                CHECK(r.prefix_blocks[0] == first[0] && r.prefix_blocks[1] == first[1]);
                CHECK(r.prefix_blocks[0] != r.prefix_blocks[1]);
            } else {
                CHECK(r.prefix_blocks[0] != first[0] && r.prefix_blocks[0] != first[1]);
            }
        }
        CHECK_EQ_I(trace_next(s, &r, &e), 0);
        trace_close(s);
    }
    /* the CSV's hash_ids column names the same blocks as the JSONL (the fixture's rows, as sessions of
     * one turn each; the third row's history is a whole block shorter than the JSONL's) */
    {
        TraceOptions oj = topts(test_path("tests/fixtures/traces/mooncake.jsonl"));
        TraceOptions oc = topts(test_path("tests/fixtures/traces/hash_ids.csv"));
        KvErr e;
        TraceSource *sj = trace_open(&oj, &e), *sc = sj ? trace_open(&oc, &e) : NULL;
        CHECK_MSG(sj && sc, "%s", e.msg);
        TraceRequest rj, rc;
        for (int i = 0; sj && sc && i < 4; i++) {
            CHECK_EQ_I(trace_next(sj, &rj, &e), 1);
            CHECK_EQ_I(trace_next(sc, &rc, &e), 1);
            CHECK_EQ_I(rc.n_prefix_blocks, rj.n_prefix_blocks);
            for (int k = 0; k < rc.n_prefix_blocks && k < rj.n_prefix_blocks; k++) CHECK(rc.prefix_blocks[k] == rj.prefix_blocks[k]);
        }
        trace_close(sj);
        trace_close(sc);
        /* a malformed id names the file, line and column */
        oc = topts(test_path("tests/fixtures/traces/hash_ids_bad.csv"));
        TraceSource *sb = trace_open(&oc, &e);
        CHECK(sb == NULL);
        if (!sb) CHECK_CONTAINS(e.msg, "hash_ids_bad.csv: line 3: column hash_ids: expected space-separated non-negative integers, got \"0 1x\"");
        trace_close(sb);
    }
    /* sources that name no blocks give none: the canonical CSV, the generators */
    const char *none[2] = {"tests/fixtures/traces/sorted.csv", "sharegpt4"};
    for (int k = 0; k < 2; k++) {
        TraceOptions o = topts(k ? none[k] : test_path(none[k]));
        o.max_requests = 20;
        KvErr e;
        TraceSource *s = trace_open(&o, &e);
        CHECK_MSG(s != NULL, "%s", e.msg);
        if (!s) return;
        TraceRequest r;
        while (trace_next(s, &r, &e) == 1) CHECK(r.n_prefix_blocks == 0 && r.prefix_blocks == NULL);
        trace_close(s);
    }
}

TEST(trace_mooncake_fixture_history_from_shared_prefixes)
{
    TraceOptions o = topts(test_path("tests/fixtures/traces/mooncake.jsonl"));
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "mooncake");
    CHECK_CONTAINS(trace_describe(s), "streamed in file order");
    Reqs q;
    CHECK(read_all(s, &q, 100, &e) == 0);
    trace_close(s);
    check_mooncake_stream(t, &q);
    free(q.r);
    /* out of time order: indexed, and "seen before" means before in time */
    o = topts(test_path("tests/fixtures/traces/mooncake_shuffled.jsonl"));
    o.format = "mooncake";
    s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "indexed");
    CHECK(read_all(s, &q, 100, &e) == 0);
    trace_close(s);
    check_mooncake_stream(t, &q);
    free(q.r);
    /* time scale on ms timestamps */
    o = topts(test_path("tests/fixtures/traces/mooncake.jsonl"));
    o.time_scale = 0.5;
    q = load(t, &o);
    if (q.n == 4) CHECK_EQ_I(q.r[3].arrival_ns, 6250000);
    free(q.r);
}

TEST(trace_mooncake_malformed_lines)
{
    const char *ok = "{\"timestamp\": 0, \"input_length\": 10, \"output_length\": 1, \"hash_ids\": [0]}\n";
    char text[512];
    struct {
        const char *name, *line, *frag;
    } cases[] = {
        {"m_json.jsonl", "{\"timestamp\": 5, \"input_length\": 10", "m_json.jsonl: line 2: invalid JSON"},
        {"m_array.jsonl", "[1, 2]", "m_array.jsonl: line 2: expected a JSON object"},
        {"m_ts.jsonl", "{\"timestamp\": \"x\", \"input_length\": 1, \"output_length\": 1, \"hash_ids\": []}", "m_ts.jsonl: line 2: field timestamp"},
        {"m_negts.jsonl", "{\"timestamp\": -3, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": []}", "line 2: field timestamp"},
        {"m_in.jsonl", "{\"timestamp\": 1, \"input_length\": 1.5, \"output_length\": 1, \"hash_ids\": []}", "m_in.jsonl: line 2: field input_length"},
        {"m_out.jsonl", "{\"timestamp\": 1, \"input_length\": 1, \"hash_ids\": []}", "m_out.jsonl: line 2: field output_length"},
        {"m_ids.jsonl", "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": 3}", "m_ids.jsonl: line 2: field hash_ids"},
        {"m_id.jsonl", "{\"timestamp\": 1, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": [1, -2]}", "m_id.jsonl: line 2: field hash_ids[1]"},
        {"m_big.jsonl", "{\"timestamp\": 1e300, \"input_length\": 1, \"output_length\": 1, \"hash_ids\": []}", "m_big.jsonl: line 2: field timestamp"},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        snprintf(text, sizeof text, "%s%s\n", ok, cases[i].line);
        TraceOptions o = topts(test_write_file(t, cases[i].name, text));
        expect_open_error(t, &o, cases[i].frag, NULL);
    }
    TraceOptions o = topts(test_write_file(t, "m_empty.jsonl", "\n"));
    expect_open_error(t, &o, "m_empty.jsonl: line 1: empty", NULL);
    /* zero input_length: new input 1, history 0 */
    o = topts(test_write_file(t, "m_zero.jsonl", "{\"timestamp\": 0, \"input_length\": 0, \"output_length\": 2, \"hash_ids\": []}\n"));
    Reqs q = load(t, &o);
    CHECK_EQ_U(q.n, 1);
    if (q.n == 1) CHECK_REQ(&q.r[0], 0, 0, 0, 0, 1, 2, 0);
    free(q.r);
}

/* ---------------------------------------------------------------- Vidur */

TEST(trace_vidur_fixture_and_errors)
{
    TraceOptions o = topts(test_path("tests/fixtures/traces/vidur.csv"));
    KvErr e;
    TraceSource *s = trace_open(&o, &e); /* auto-detected by its header */
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "vidur");
    Reqs q;
    CHECK(read_all(s, &q, 100, &e) == 0);
    trace_close(s);
    CHECK_EQ_U(q.n, 3);
    if (q.n == 3) {
        CHECK_REQ(&q.r[0], 0, 0, 0, 0, 1000, 200, 0);
        CHECK_REQ(&q.r[1], 1, 0, 250000000, 0, 1, 5, 0);
        CHECK_REQ(&q.r[2], 2, 0, 1500000000, 0, 300, 1, 0);
    }
    free(q.r);
    /* lengths only (no arrived_at): Poisson arrivals at the given rate, out-of-order file indexed */
    o = topts(test_write_file(t, "v_len.csv", "num_decode_tokens,num_prefill_tokens\n5,50\n6,60\n"));
    o.format = "vidur";
    o.session_rate_per_s = 2.0;
    o.seed = 3;
    q = load(t, &o);
    TracePoisson p;
    trace_poisson_init(&p, 3, 2.0);
    int64_t a1 = trace_ns_from_s(trace_poisson_next_s(&p), 1.0);
    int64_t a2 = trace_ns_from_s(trace_poisson_next_s(&p), 1.0);
    CHECK_EQ_U(q.n, 2);
    if (q.n == 2) {
        CHECK_REQ(&q.r[0], 0, 0, a1, 0, 50, 5, 0);
        CHECK_REQ(&q.r[1], 1, 0, a2, 0, 60, 6, 0);
    }
    free(q.r);
    o = topts(test_write_file(t, "v_unsorted.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n2,1,1\n1,2,2\n"));
    q = load(t, &o);
    CHECK_EQ_U(q.n, 2);
    if (q.n == 2) CHECK_REQ(&q.r[0], 0, 0, 1000000000, 0, 2, 2, 0);
    free(q.r);
    o = topts(test_write_file(t, "v_bad.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,1\n0.5,abc,1\n"));
    expect_open_error(t, &o, "v_bad.csv: line 3: column num_prefill_tokens: expected a non-negative integer, got \"abc\"", NULL);
    o = topts(test_write_file(t, "v_time.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\nlater,1,1\n"));
    expect_open_error(t, &o, "v_time.csv: line 2: column arrived_at", NULL);
    o = topts(test_write_file(t, "v_short.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1\n"));
    expect_open_error(t, &o, "v_short.csv: line 2: expected 3 columns", NULL);
    o = topts(test_write_file(t, "v_miss.csv", "arrived_at,num_prefill_tokens\n0,1\n"));
    expect_open_error(t, &o, "v_miss.csv: line 1: the header has no column num_decode_tokens", NULL);
    o = topts(test_write_file(t, "v_dup.csv", "arrived_at,num_prefill_tokens,num_decode_tokens,arrived_at\n"));
    expect_open_error(t, &o, "v_dup.csv: line 1: column arrived_at appears twice", NULL);
    o = topts(test_write_file(t, "v_empty.csv", ""));
    o.format = "vidur";
    expect_open_error(t, &o, "v_empty.csv: line 1: empty", NULL);
    o = topts(test_write_file(t, "v_quote.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n\"0,1,1\n"));
    expect_open_error(t, &o, "v_quote.csv: line 2: unterminated quoted field", NULL);
    o = topts(test_write_file(t, "v_qhdr.csv", "\"arrived_at,num_prefill_tokens\n"));
    o.format = "vidur";
    expect_open_error(t, &o, "v_qhdr.csv: line 1: unterminated quoted field in the header", NULL);
    o = topts(test_write_file(t, "v_huge.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n999999999999,1,1\n"));
    expect_open_error(t, &o, "v_huge.csv: line 2: column arrived_at: value 1e+12 out of range [0, 4000000000]", NULL);
    o = topts(test_write_file(t, "v_far.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n900000000,1,1\n"));
    o.time_scale = 1e3;
    expect_open_error(t, &o, "v_far.csv: line 2: column arrived_at: value 900000000 s × time_scale 1000 is out of range", NULL);
}

/* ---------------------------------------------------------------- real files */

TEST(trace_real_leval)
{
    const char *path = test_path("traces/data/leval.csv");
    if (!file_exists(path)) SKIP("%s absent", path);
    TraceOptions o = topts(path);
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "2074 rows, 299 sessions");
    CHECK_CONTAINS(trace_describe(s), "streamed in file order");
    Reqs q;
    CHECK(read_all(s, &q, (size_t)-1, &e) == 0);
    trace_close(s);
    CHECK_EQ_U(q.n, 2074);
    order_check_all(t, &q);
    if (q.n == 2074) {
        /* leval_coursera_0000 turns 0..2 and the last row (leval_tv_show_summ_0287 turn 1) */
        CHECK_EQ_I(q.r[0].new_input_tokens, 5157);
        CHECK_EQ_I(q.r[0].output_tokens, 2);
        CHECK_EQ_I(q.r[0].history_tokens, 0);
        CHECK(q.r[0].arrival_ns > 0);
        CHECK_REQ(&q.r[1], 0, 1, -1, 0, 54, 2, 5107);
        CHECK_REQ(&q.r[2], 0, 2, -1, 0, 38, 2, 5107);
        CHECK_REQ(&q.r[2073], 287, 1, -1, 0, 13, 134, 5219); /* the file interleaves some sessions */
    }
    Means m = means_of(&q);
    CHECK_NEAR(m.new_in, 1586.5, 0.005, 0);
    CHECK_NEAR(m.out, 48.3, 0.005, 0);
    CHECK_NEAR(m.hist, 8270.6, 0.005, 0);
    /* Poisson sessions at the default 1/s: 299 starts over ~299 s */
    double last_start = 0;
    for (size_t i = 0; i < q.n; i++)
        if (q.r[i].turn == 0) last_start = (double)q.r[i].arrival_ns / 1e9;
    CHECK_NEAR(last_start, 299.0, 0.2, 0);
    free(q.r);
}

TEST(trace_real_swebench)
{
    const char *path = test_path("traces/data/swebench.csv");
    if (!file_exists(path)) SKIP("%s absent", path);
    TraceOptions o = topts(path);
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "20163 rows, 500 sessions");
    CHECK_CONTAINS(trace_describe(s), "indexed");
    Reqs q;
    CHECK(read_all(s, &q, (size_t)-1, &e) == 0);
    trace_close(s);
    CHECK_EQ_U(q.n, 20163);
    order_check_all(t, &q);
    if (q.n == 20163) {
        /* release order: pydata__xarray-6938 turn 0 at 0 s; then django__django-14493, -14672, -15916
         * turn 0 at 1 s (file order among ties); last: sympy__sympy-14248 turns 109, 110 */
        CHECK_REQ(&q.r[0], 0, 0, 0, 0, 2129, 33, 0);
        CHECK_REQ(&q.r[1], 1, 0, 1000000000, 0, 1565, 44, 0);
        CHECK_REQ(&q.r[2], 2, 0, 1000000000, 0, 2943, 52, 0);
        CHECK_REQ(&q.r[3], 3, 0, 1000000000, 0, 1576, 44, 0);
        CHECK_REQ(&q.r[20161], 498, 109, 6825000000000LL, 0, 314, 109, 43638);
        CHECK_REQ(&q.r[20162], 498, 110, 6830000000000LL, 0, 24, 32, 44061);
    }
    Means m = means_of(&q);
    CHECK_NEAR(m.new_in, 296.0, 0.005, 0);
    CHECK_NEAR(m.out, 234.7, 0.005, 0);
    CHECK_NEAR(m.hist, 13933.7, 0.005, 0);
    free(q.r);
}

TEST(trace_real_mooncake)
{
    const char *path = test_path("traces/data/mooncake_conversation.csv");
    if (!file_exists(path)) SKIP("%s absent", path);
    TraceOptions o = topts(path);
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "12031 rows");
    CHECK_CONTAINS(trace_describe(s), "streamed in file order");
    Reqs q;
    CHECK(read_all(s, &q, (size_t)-1, &e) == 0);
    trace_close(s);
    CHECK_EQ_U(q.n, 12031);
    order_check_all(t, &q);
    if (q.n == 12031) {
        CHECK_REQ(&q.r[0], 0, 0, 0, 0, 6758, 500, 0);
        CHECK_REQ(&q.r[1], 1, 0, 0, 0, 6810, 490, 512);
        CHECK_REQ(&q.r[2], 2, 0, 0, 0, 6724, 794, 512);
        CHECK_EQ_I(q.r[12030].arrival_ns, 3536999000000LL);
        CHECK_EQ_I(q.r[12030].new_input_tokens, 20262);
        /* line 263: new_input 0, history 1902 → 1 and 1901 */
        CHECK_EQ_I(q.r[261].new_input_tokens, 1);
        CHECK_EQ_I(q.r[261].history_tokens, 1901);
    }
    Means m = means_of(&q);
    CHECK_NEAR(m.new_in, 7538.5, 0.005, 0);
    CHECK_NEAR(m.out, 342.6, 0.005, 0);
    CHECK_NEAR(m.hist, 4496.6, 0.005, 0);
    free(q.r);
}

/* ---------------------------------------------------------------- generators */

TEST(trace_generator_list)
{
    CHECK_EQ_I(trace_generator_count(), 5);
    CHECK_STR(trace_generator_name(0), "sharegpt4");
    CHECK_STR(trace_generator_name(1), "leval");
    CHECK_STR(trace_generator_name(2), "swebench");
    CHECK_STR(trace_generator_name(3), "shared-prefix");
    CHECK_STR(trace_generator_name(4), "multiturn");
    for (int i = 0; i < 5; i++) CHECK(trace_generator_summary(i) && strlen(trace_generator_summary(i)) > 20);
    CHECK(trace_generator_name(5) == NULL);
    CHECK(trace_generator_summary(-1) == NULL);
}

/* shared-prefix: every request names its group's whole system-prompt blocks (16 tokens each); two
 * requests' names are equal exactly when their groups are, and no block is shared across groups */
TEST(trace_shared_prefix_names_a_prompt_per_group)
{
    static const struct {
        int64_t prompt;
        int groups, want_blocks;
    } cases[] = {{0, 0, 128}, {100, 3, 6}, {2048, 1, 128}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        TraceOptions o = topts("shared-prefix");
        o.max_requests = 300;
        o.system_prompt_tokens = cases[k].prompt;
        o.prompt_groups = cases[k].groups;
        KvErr e;
        TraceSource *ts = trace_open(&o, &e);
        if (!ts) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        int nb = cases[k].want_blocks, G = cases[k].groups ? cases[k].groups : 64;
        uint64_t *first = calloc((size_t)G * (size_t)nb, sizeof *first); /* each group's names, as first seen */
        uint64_t seen_first[64] = {0};
        int groups_seen = 0, n = 0;
        TraceRequest r;
        while (trace_next(ts, &r, &e) == 1) {
            n++;
            CHECK_EQ_I(r.n_prefix_blocks, nb);
            CHECK_EQ_I(r.prefix_block_tokens, 16);
            CHECK_EQ_I(r.new_input_tokens, (cases[k].prompt ? cases[k].prompt : 2048) + 128);
            CHECK_EQ_I(r.output_tokens, 256);
            CHECK_EQ_I(r.history_tokens, 0);
            if (r.n_prefix_blocks != nb || !first) break;
            int g = 0;
            while (g < groups_seen && seen_first[g] != r.prefix_blocks[0]) g++;
            if (g == groups_seen) {
                CHECK(groups_seen < G);
                if (groups_seen >= G) break;
                seen_first[groups_seen++] = r.prefix_blocks[0];
                memcpy(first + (size_t)g * (size_t)nb, r.prefix_blocks, (size_t)nb * sizeof *first);
            }
            CHECK(memcmp(first + (size_t)g * (size_t)nb, r.prefix_blocks, (size_t)nb * sizeof *first) == 0);
            for (int j = 0; j < groups_seen; j++) /* no block of another group's chain */
                if (j != g)
                    for (int b = 0; b < nb; b++) CHECK(first[(size_t)j * (size_t)nb + (size_t)b] != r.prefix_blocks[b]);
        }
        CHECK_EQ_I(n, 300);
        if (G == 64) CHECK_MSG(groups_seen > 50, "%d of 64 groups in 300 requests", groups_seen);
        else CHECK_EQ_I(groups_seen, G);
        free(first);
        trace_close(ts);
    }
}

TEST(trace_generators_deterministic_by_seed)
{
    for (int g = 0; g < trace_generator_count(); g++) {
        TraceOptions o = topts(trace_generator_name(g));
        o.seed = 42;
        o.max_requests = 5000;
        Reqs a = load(t, &o), b = load(t, &o);
        o.seed = 43;
        Reqs c = load(t, &o);
        CHECK_EQ_U(a.n, 5000);
        CHECK_EQ_U(b.n, 5000);
        int same = 1, differ = 0;
        for (size_t i = 0; i < a.n && i < b.n && i < c.n; i++) {
            same &= req_equal(&a.r[i], &b.r[i]);
            differ += !req_equal(&a.r[i], &c.r[i]);
        }
        CHECK_MSG(same, "%s: same seed gave different streams", trace_generator_name(g));
        /* multiturn's rounds are fixed: only its sessions' starts (the first turns, 1 in 10) are drawn */
        int want = strcmp(trace_generator_name(g), "multiturn") ? 2500 : 499;
        CHECK_MSG(differ > want, "%s: seeds 42 and 43 differ in only %d of 5000 requests", trace_generator_name(g), differ);
        order_check_all(t, &a);
        free(a.r);
        free(b.r);
        free(c.r);
    }
    /* default limit 1000 */
    TraceOptions o = topts("leval");
    Reqs d = load(t, &o);
    CHECK_EQ_U(d.n, 1000);
    free(d.r);
}

/* Per-session statistics of a generated stream; the last session (possibly cut) is left out. */
typedef struct SessStats {
    int64_t sessions;
    int64_t *turns;        /* requests per complete session */
    int64_t *last_history; /* history_tokens of each complete session's last turn */
} SessStats;

static SessStats sess_stats(const Reqs *q)
{
    SessStats st = {0, calloc(q->n + 1, sizeof(int64_t)), calloc(q->n + 1, sizeof(int64_t))};
    size_t start = 0;
    for (size_t i = 1; i <= q->n; i++) {
        if (i == q->n) break; /* the last session may be cut by max_requests */
        if (q->r[i].turn == 0) {
            st.turns[st.sessions] = (int64_t)(i - start);
            st.last_history[st.sessions] = q->r[i - 1].history_tokens;
            st.sessions++;
            start = i;
        }
    }
    return st;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double median_i64(int64_t *v, int64_t n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    return n ? (double)v[n / 2] : 0;
}

TEST(trace_gen_sharegpt4_matches_published_figures)
{
    TraceOptions o = topts("sharegpt4");
    o.seed = 2024;
    o.max_requests = 100000;
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK(s != NULL);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "generator sharegpt4: seed 2024, sessions Poisson 0.5/s, think 30 s");
    Reqs q;
    CHECK(read_all(s, &q, (size_t)-1, &e) == 0);
    CHECK_EQ_U(q.n, 100000);
    order_check_all(t, &q);
    Means m = means_of(&q);
    CHECK_NEAR(m.new_in, 67.0, 0.10, 0);
    CHECK_NEAR(m.out, 359.0, 0.10, 0);
    SessStats st = sess_stats(&q);
    int64_t pass = 0, cut = 0;
    for (int64_t i = 0; i < st.sessions; i++) pass += st.last_history[i] > 2500;
    CHECK_NEAR((double)pass / (double)st.sessions, 0.50, 0, 0.08);
    double med = median_i64(st.turns, st.sessions);
    CHECK_MSG(med >= 6 && med <= 7, "median rounds %g", med);
    for (size_t i = 0; i < q.n; i++) {
        cut += q.r[i].history_tokens == 16384;
        CHECK(q.r[i].history_tokens <= 16384);
        if (q.r[i].turn > 0) CHECK_EQ_I(q.r[i].think_ns, 30000000000LL);
    }
    /* the 16K cap is counted as truncation */
    CHECK(cut > 0);
    CHECK_EQ_I(trace_truncated_count(s), cut);
    free(st.turns);
    free(st.last_history);
    free(q.r);
    trace_close(s);
}

TEST(trace_gen_leval_matches_file)
{
    TraceOptions o = topts("leval");
    o.seed = 5;
    o.max_requests = 100000;
    Reqs q = load(t, &o);
    order_check_all(t, &q);
    /* targets: leval.csv (SOURCES.md); tolerances cover the fit's residual (FITS.md) and noise */
    Means m = means_of(&q);
    CHECK_NEAR(m.new_in, 1586.5, 0.10, 0);
    CHECK_NEAR(m.out, 48.3, 0.15, 0);
    CHECK_NEAR(m.hist, 8270.6, 0.10, 0);
    SessStats st = sess_stats(&q);
    int64_t n = 0;
    for (int64_t i = 0; i < st.sessions; i++) n += st.turns[i];
    CHECK_NEAR((double)n / (double)st.sessions, 6.94, 0.10, 0);
    for (size_t i = 0; i < q.n; i++)
        if (q.r[i].turn > 0) {
            CHECK_EQ_I(q.r[i].think_ns, 0); /* back to back */
            /* coherent history */
            CHECK_EQ_I(q.r[i].history_tokens, q.r[i - 1].history_tokens + q.r[i - 1].new_input_tokens + q.r[i - 1].output_tokens);
        }
    free(st.turns);
    free(st.last_history);
    free(q.r);
}

TEST(trace_gen_swebench_matches_file)
{
    TraceOptions o = topts("swebench");
    o.seed = 9;
    o.max_requests = 100000;
    Reqs q = load(t, &o);
    order_check_all(t, &q);
    Means m = means_of(&q);
    CHECK_NEAR(m.new_in, 296.0, 0.10, 0);
    CHECK_NEAR(m.out, 234.7, 0.10, 0);
    CHECK_NEAR(m.hist, 13933.7, 0.10, 0);
    SessStats st = sess_stats(&q);
    int64_t n = 0;
    for (int64_t i = 0; i < st.sessions; i++) n += st.turns[i];
    CHECK_NEAR((double)n / (double)st.sessions, 40.3, 0.10, 0);
    int64_t *think = calloc(q.n, sizeof *think);
    int64_t nt = 0;
    for (size_t i = 0; i < q.n; i++)
        if (q.r[i].turn > 0) {
            think[nt++] = q.r[i].think_ns;
            CHECK_EQ_I(q.r[i].history_tokens, q.r[i - 1].history_tokens + q.r[i - 1].new_input_tokens + q.r[i - 1].output_tokens);
        }
    qsort(think, (size_t)nt, sizeof *think, cmp_i64);
    CHECK_NEAR((double)think[nt / 2] / 1e9, 4.0, 0.10, 0);
    CHECK_NEAR((double)think[(nt * 9) / 10] / 1e9, 13.0, 0.10, 0);
    CHECK(think[nt - 1] <= 600000000000LL);
    /* sessions Poisson at the fitted 0.0802/s */
    int64_t first = -1, last = 0, starts = 0;
    for (size_t i = 0; i < q.n; i++)
        if (q.r[i].turn == 0) {
            if (first < 0) first = q.r[i].arrival_ns;
            last = q.r[i].arrival_ns;
            starts++;
        }
    CHECK_NEAR((double)(starts - 1) / ((double)(last - first) / 1e9), 0.080225, 0.10, 0);
    free(think);
    free(st.turns);
    free(st.last_history);
    free(q.r);
}

TEST(trace_gen_time_scale_rate_and_think)
{
    for (int g = 0; g < trace_generator_count(); g++) {
        TraceOptions o = topts(trace_generator_name(g));
        o.seed = 11;
        o.max_requests = 3000;
        Reqs a = load(t, &o);
        o.time_scale = 2.0;
        Reqs b = load(t, &o);
        o.time_scale = 1.0;
        o.session_rate_per_s = 3.0;
        o.think_ns = 1000000000;
        Reqs c = load(t, &o);
        int64_t bad_scale = 0, bad_tokens = 0;
        double sum_gap = 0;
        int64_t starts = 0, last = 0;
        for (size_t i = 0; i < a.n && i < b.n && i < c.n; i++) {
            const TraceRequest *x = &a.r[i], *y = &b.r[i], *z = &c.r[i];
            /* time_scale 2: every time doubles (±1 ns rounding), tokens unchanged */
            if (x->arrival_ns >= 0 ? llabs(y->arrival_ns - 2 * x->arrival_ns) > 1 : y->arrival_ns != -1) bad_scale++;
            if (llabs(y->think_ns - 2 * x->think_ns) > 1) bad_scale++;
            /* another rate and think time: same tokens and sessions, think exactly 1 s */
            if (z->new_input_tokens != x->new_input_tokens || z->output_tokens != x->output_tokens ||
                z->history_tokens != x->history_tokens || z->turn != x->turn)
                bad_tokens++;
            if (z->turn > 0 && z->think_ns != 1000000000) bad_tokens++;
            if (z->turn == 0) {
                sum_gap += (double)(z->arrival_ns - last) / 1e9;
                last = z->arrival_ns;
                starts++;
            }
        }
        CHECK_MSG(bad_scale == 0, "%s: %lld requests not scaled by 2", trace_generator_name(g), (long long)bad_scale);
        CHECK_MSG(bad_tokens == 0, "%s: %lld requests changed with the rate", trace_generator_name(g), (long long)bad_tokens);
        if (g == 0) CHECK_NEAR(sum_gap / (double)starts, 1.0 / 3.0, 0.15, 0); /* ~400 sessions */
        free(a.r);
        free(b.r);
        free(c.r);
    }
}

TEST(trace_gen_max_context_truncation_counted)
{
    TraceOptions o = topts("swebench");
    o.seed = 3;
    o.max_requests = 20000;
    Reqs raw = load(t, &o);
    o.max_context_tokens = 8192;
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK(s != NULL);
    if (!s) return;
    CHECK_CONTAINS(trace_describe(s), "max_context 8192");
    Reqs q;
    CHECK(read_all(s, &q, (size_t)-1, &e) == 0);
    CHECK_EQ_U(q.n, raw.n);
    int64_t expect_cut = 0, bad = 0;
    for (size_t i = 0; i < q.n && i < raw.n; i++) {
        const TraceRequest *r = &raw.r[i], *c = &q.r[i];
        if (r->history_tokens + r->new_input_tokens > 8192) {
            expect_cut++;
            int64_t nw = r->new_input_tokens < 8192 ? r->new_input_tokens : 8192;
            if (c->new_input_tokens != nw || c->history_tokens != 8192 - nw) bad++;
        } else if (!req_equal(r, c)) {
            bad++;
        }
    }
    CHECK(expect_cut > 1000);
    CHECK_EQ_I(bad, 0);
    CHECK_EQ_I(trace_truncated_count(s), expect_cut);
    trace_close(s);
    free(q.r);
    free(raw.r);
}

/* ---------------------------------------------------------------- memory */

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

TEST(trace_gen_streams_a_million_requests_in_constant_memory)
{
    /* O(1) per generator: max RSS must not grow by more than 4 MB over 1,000,000 requests
     * (about 0.1 s plain, ~1 s under ASan) */
    TraceOptions o = topts("sharegpt4");
    o.max_requests = 1000000;
    KvErr e;
    TraceSource *s = trace_open(&o, &e);
    CHECK(s != NULL);
    if (!s) return;
    long before = max_rss_kb();
    TraceRequest r;
    int64_t n = 0, tokens = 0;
    OrderCheck c = {0};
    while (trace_next(s, &r, &e) == 1) {
        tokens += r.new_input_tokens;
        if (n < 100000) order_feed(t, &c, &r, n);
        n++;
    }
    free(c.max_turn);
    long after = max_rss_kb();
    CHECK_EQ_I(n, 1000000);
    CHECK(tokens > 0);
    CHECK_MSG(after - before < 4096, "max RSS grew by %ld KiB", after - before);
    trace_close(s);
}

/* Reproducers (hardening issue): values past the limits of trace.h, checked where they enter. A row
 * with history and new tokens of 9e18 overflowed the simulator's sums (UBSan abort; a release build
 * failed later with "event queue ... pushed at -9.2e18 ns"). */
TEST(trace_values_out_of_range_name_file_line_and_range)
{
    const char *hdr = "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n";
    char text[512];
    struct {
        const char *name, *rows, *frag1, *frag2;
    } cases[] = {
        {"big.csv", "a,0,0,9000000000000000000,10,9000000000000000000\n",
         "big.csv: line 2: column new_input_tokens: value 9000000000000000000 out of range [0, 2147483647]", NULL},
        {"bighist.csv", "a,0,0,1,1,2147483648\n", "bighist.csv: line 2: column history_tokens: value 2147483648 out of range [0, 2147483647]", NULL},
        {"sum.csv", "a,0,0,2000000000,1,2000000000\n",
         "sum.csv: line 2: new_input_tokens + output_tokens + history_tokens: value 4000000001 out of range [0, 2147483647]", NULL},
        {"late.csv", "a,0,5000000000,1,1,0\n", "late.csv: line 2: column arrival_s: value 5000000000 out of range [0, 4000000000]", NULL},
        {"nul.csv", "a,0\0,0,1,1,0\n", "nul.csv: line 2: column 4: a NUL byte", NULL},
    };
    for (size_t i = 0; i < KV_ARRAY_LEN(cases); i++) {
        size_t n = strlen(hdr) + strlen(cases[i].rows);
        snprintf(text, sizeof text, "%s%s", hdr, cases[i].rows);
        if (strcmp(cases[i].name, "nul.csv") == 0) { /* the NUL is part of the text */
            memcpy(text + strlen(hdr), "a,0\0,0,1,1,0\n", 13);
            n = strlen(hdr) + 13;
        }
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", test_tmpdir(t), cases[i].name);
        FILE *f = fopen(path, "wb");
        CHECK(f != NULL);
        if (!f) return;
        fwrite(text, 1, n, f);
        fclose(f);
        TraceOptions o = topts(path);
        expect_open_error(t, &o, cases[i].frag1, cases[i].frag2);
    }
    /* the edge values themselves are accepted */
    snprintf(text, sizeof text, "%sa,0,4000000000,2147483645,1,1\n", hdr);
    TraceOptions o = topts(test_write_file(t, "edge.csv", text));
    KvErr e = {{0}};
    TraceSource *s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    TraceRequest r;
    if (s) {
        CHECK_EQ_I(trace_next(s, &r, &e), 1);
        CHECK_EQ_I(r.arrival_ns, TRACE_MAX_TIME_NS);
        CHECK_EQ_I(r.new_input_tokens + r.output_tokens + r.history_tokens, TRACE_MAX_TOKENS);
    }
    trace_close(s);
    /* mooncake and vidur */
    o = topts(test_write_file(t, "m_big.jsonl", "{\"timestamp\": 0, \"input_length\": 3000000000, \"output_length\": 1, \"hash_ids\": []}\n"));
    expect_open_error(t, &o, "m_big.jsonl: line 1: field input_length: value 3000000000 out of range [0, 2147483647]", NULL);
    o = topts(test_write_file(t, "m_late.jsonl", "{\"timestamp\": 5e15, \"input_length\": 3, \"output_length\": 1, \"hash_ids\": []}\n"));
    expect_open_error(t, &o, "m_late.jsonl: line 1: field timestamp (ms): value 5e+15 out of range [0, 4e+12]", NULL);
    o = topts(test_write_file(t, "v_big.csv", "arrived_at,num_prefill_tokens,num_decode_tokens\n0,1,2147483647\n"));
    expect_open_error(t, &o, "v_big.csv: line 2: num_prefill_tokens + num_decode_tokens: value 2147483648 out of range [0, 2147483647]", NULL);
    /* think times: the option, and their sum with the latest arrival (closed-loop release times) */
    o = topts("sharegpt4");
    o.think_ns = TRACE_MAX_THINK_NS + 1;
    expect_open_error(t, &o, "trace: think_ns: value 100000000000000001 out of range [0, 100000000000000000]", NULL);
    snprintf(text, sizeof text, "%sa,0,3950000000,1,1,0\na,1,,1,1,0\n", hdr);
    o = topts(test_write_file(t, "thinksum.csv", text));
    o.think_ns = TRACE_MAX_THINK_NS;
    s = trace_open(&o, &e);
    CHECK_MSG(s != NULL, "%s", e.msg);
    if (s) {
        CHECK_EQ_I(trace_next(s, &r, &e), 1);
        CHECK_EQ_I(trace_next(s, &r, &e), -1);
        CHECK_CONTAINS(e.msg, "thinksum.csv: request 1 (session 0 turn 1): the latest arrival (3.95e+09 s) plus the think times so far");
        CHECK_CONTAINS(e.msg, "the limit of simulated time");
    }
    trace_close(s);
}

/* Reproducers: --trace /dev/zero read ~1 GB and then said "line 1: empty"; a 200 MB line took 200 MB;
 * a FIFO hung. Now: regular files only (without blocking on a FIFO) and lines of at most 1 MiB. */
TEST(trace_files_must_be_regular_and_lines_short)
{
    TraceOptions o = topts("/dev/zero");
    expect_open_error(t, &o, "/dev/zero: not a regular file (a device)", NULL);
    o.format = "csv";
    expect_open_error(t, &o, "/dev/zero: not a regular file (a device)", NULL);
    o = topts(test_tmpdir(t));
    o.format = "csv";
    expect_open_error(t, &o, "not a regular file (a directory)", NULL);
    char fifo[4096];
    snprintf(fifo, sizeof fifo, "%s/trace.fifo", test_tmpdir(t));
    CHECK(mkfifo(fifo, 0600) == 0);
    o = topts(fifo);
    expect_open_error(t, &o, "trace.fifo: not a regular file (a FIFO or pipe)", NULL);
    o.format = "mooncake";
    expect_open_error(t, &o, "trace.fifo: not a regular file (a FIFO or pipe)", NULL);

    /* a line of exactly 1 MiB is read; one byte more is refused (at 1 MiB, not at the line's end) */
    const char *hdr = "session_id,turn,arrival_s,new_input_tokens,output_tokens,history_tokens\n";
    const char *tail = ",0,0,1,1,0";
    size_t max = (size_t)TRACE_MAX_LINE_BYTES, hl = strlen(hdr), tl = strlen(tail);
    char *text = malloc(hl + max + 64);
    CHECK(text != NULL);
    if (!text) return;
    for (int extra = 0; extra <= 1; extra++) {
        size_t id = max - tl + (size_t)extra;
        memcpy(text, hdr, hl);
        memset(text + hl, 's', id);
        memcpy(text + hl + id, tail, tl);
        memcpy(text + hl + id + tl, "\n", 2);
        o = topts(test_write_file(t, extra ? "toolong.csv" : "longest.csv", text));
        if (extra) {
            expect_open_error(t, &o, "toolong.csv: line 2: longer than 1 MiB", NULL);
        } else {
            KvErr e = {{0}};
            TraceSource *s = trace_open(&o, &e);
            CHECK_MSG(s != NULL, "%s", e.msg);
            TraceRequest r;
            if (s) CHECK_EQ_I(trace_next(s, &r, &e), 1);
            trace_close(s);
        }
    }
    free(text);
}

/* multiturn: sessions of 10 rounds, each 2,048 new tokens after the whole conversation so far (every
 * earlier round's input and output), 16 output tokens, think 0 */
TEST(trace_multiturn_rounds_grow_the_history)
{
    TraceOptions o = topts("multiturn");
    o.max_requests = 40;
    Reqs a = load(t, &o);
    CHECK_EQ_U(a.n, 40);
    for (size_t i = 0; i < a.n; i++) {
        const TraceRequest *r = &a.r[i];
        CHECK_EQ_I(r->turn, (int)(i % 10));
        CHECK_EQ_I(r->new_input_tokens, 2048);
        CHECK_EQ_I(r->output_tokens, 16);
        CHECK_EQ_I(r->history_tokens, (int64_t)r->turn * (2048 + 16));
        if (r->turn > 0) CHECK_EQ_I(r->think_ns, 0);
    }
    free(a.r);
}

/* multiturn with its shape set (rounds, round_tokens, round_output_tokens): Mooncake's SSD offload
 * benchmark's 4,096 new tokens and 1 output token per round, here 4 rounds per session */
TEST(trace_multiturn_shape_settings)
{
    TraceOptions o = topts("multiturn");
    o.max_requests = 12;
    o.rounds = 4;
    o.round_tokens = 4096;
    o.round_output_tokens = 1;
    Reqs a = load(t, &o);
    CHECK_EQ_U(a.n, 12);
    for (size_t i = 0; i < a.n; i++) {
        const TraceRequest *r = &a.r[i];
        CHECK_EQ_I(r->turn, (int)(i % 4));
        CHECK_EQ_U(r->session, i / 4);
        CHECK_EQ_I(r->new_input_tokens, 4096);
        CHECK_EQ_I(r->output_tokens, 1);
        CHECK_EQ_I(r->history_tokens, (int64_t)r->turn * (4096 + 1));
    }
    free(a.r);
}

/* swebench: every call's context starts with the harness's system prompt, the same for every
 * session: its whole 16-token blocks (129 tokens: 8; a larger prompt: more, up to what the context
 * holds) named alike on every request; the token counts are those of the generator without names */
TEST(trace_swebench_names_one_shared_system_prompt)
{
    static const struct {
        int64_t prompt;
        int want_blocks;
    } cases[] = {{0, 8}, {1000, 62}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        TraceOptions o = topts("swebench");
        o.max_requests = 400;
        o.system_prompt_tokens = cases[k].prompt;
        KvErr e;
        TraceSource *ts = trace_open(&o, &e);
        if (!ts) {
            CHECK_MSG(0, "%s", e.msg);
            return;
        }
        uint64_t first[64] = {0};
        int n = 0, sessions = 0, fewer = 0;
        TraceRequest r;
        while (trace_next(ts, &r, &e) == 1) {
            int64_t ctx = r.history_tokens + r.new_input_tokens;
            int want = (int)((ctx < (cases[k].prompt ? cases[k].prompt : 129) ? ctx : (cases[k].prompt ? cases[k].prompt : 129)) / 16);
            CHECK_EQ_I(r.n_prefix_blocks, want);
            CHECK_EQ_I(r.prefix_block_tokens, 16);
            fewer += want < cases[k].want_blocks;
            if (n == 0) memcpy(first, r.prefix_blocks, (size_t)r.n_prefix_blocks * sizeof *first);
            else if (r.n_prefix_blocks > 0) CHECK(memcmp(first, r.prefix_blocks, (size_t)r.n_prefix_blocks * sizeof *first) == 0);
            sessions += r.turn == 0;
            n++;
        }
        CHECK_EQ_I(n, 400);
        CHECK_MSG(sessions > 5, "%d sessions", sessions);
        CHECK_MSG(fewer < n / 10, "%d of %d requests with fewer than %d blocks", fewer, n, cases[k].want_blocks);
        trace_close(ts);
    }
}

/* sharegpt4 and multiturn with a system prompt of P tokens in G groups, read in step with the same
 * generator without one (same seed): every request is the same but for the prompt: the first turn's
 * new input is P tokens longer, a later turn's history holds them (sharegpt4: up to its 16K cap,
 * past which the history is cut and names nothing); every turn names the prompt's P / 16 whole
 * blocks, equal for the sessions of a group and on every turn of a session, none shared across
 * groups; every group is drawn; without the prompt nothing is named */
TEST(trace_chat_generators_system_prompt_per_group)
{
    static const struct {
        const char *gen;
        int64_t prompt;
        int groups, want_groups;
    } cases[] = {{"sharegpt4", 100, 3, 3}, {"sharegpt4", 1000, 0, 1}, {"multiturn", 100, 3, 3}, {"multiturn", 4000, 2, 2}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        TraceOptions oo = topts(cases[k].gen), on = topts(cases[k].gen);
        oo.max_requests = on.max_requests = 400;
        on.system_prompt_tokens = cases[k].prompt;
        on.prompt_groups = cases[k].groups;
        KvErr e;
        TraceSource *so = trace_open(&oo, &e), *sn = so ? trace_open(&on, &e) : NULL;
        if (!sn) {
            CHECK_MSG(0, "%s", e.msg);
            trace_close(so);
            return;
        }
        const int64_t P = cases[k].prompt, cap = strcmp(cases[k].gen, "sharegpt4") == 0 ? 16384 : INT64_MAX;
        const int nb = (int)(P / 16);
        uint64_t *group_names = calloc(3 * (size_t)nb, sizeof *group_names), *sess_names = calloc((size_t)nb, sizeof *sess_names);
        int groups_seen = 0, n = 0, named = 0;
        int64_t sum = 0; /* the session's context so far, uncapped */
        TraceRequest ro, rn;
        while (group_names && sess_names && trace_next(so, &ro, &e) == 1) {
            if (trace_next(sn, &rn, &e) != 1) {
                CHECK_MSG(0, "%s: the trace with a system prompt ends first (%s)", cases[k].gen, e.msg);
                break;
            }
            n++;
            CHECK(ro.session == rn.session && ro.turn == rn.turn && ro.arrival_ns == rn.arrival_ns && ro.think_ns == rn.think_ns);
            CHECK_EQ_I(rn.output_tokens, ro.output_tokens);
            CHECK_EQ_I(rn.new_input_tokens, ro.new_input_tokens + (rn.turn == 0 ? P : 0));
            CHECK_EQ_I(ro.n_prefix_blocks, 0);
            if (rn.turn == 0) sum = 0;
            CHECK_EQ_I(rn.history_tokens, sum < cap ? sum : cap);
            int want = sum <= cap ? nb : 0;
            sum += rn.new_input_tokens + rn.output_tokens;
            CHECK_EQ_I(rn.n_prefix_blocks, want);
            if (rn.n_prefix_blocks != want || want == 0) continue;
            named++;
            CHECK_EQ_I(rn.prefix_block_tokens, 16);
            if (rn.turn == 0) memcpy(sess_names, rn.prefix_blocks, (size_t)nb * sizeof *sess_names);
            else CHECK(memcmp(sess_names, rn.prefix_blocks, (size_t)nb * sizeof *sess_names) == 0);
            int g = 0;
            while (g < groups_seen && group_names[(size_t)g * (size_t)nb] != rn.prefix_blocks[0]) g++;
            if (g == groups_seen) {
                CHECK(groups_seen < cases[k].want_groups);
                if (groups_seen >= cases[k].want_groups) break;
                memcpy(group_names + (size_t)g * (size_t)nb, rn.prefix_blocks, (size_t)nb * sizeof *group_names);
                groups_seen++;
            }
            CHECK(memcmp(group_names + (size_t)g * (size_t)nb, rn.prefix_blocks, (size_t)nb * sizeof *group_names) == 0);
            for (int j = 0; j < groups_seen; j++)
                if (j != g)
                    for (int b = 0; b < nb; b++) CHECK(group_names[(size_t)j * (size_t)nb + (size_t)b] != rn.prefix_blocks[b]);
        }
        CHECK_EQ_I(n, 400);
        CHECK(trace_next(sn, &rn, &e) == 0);
        CHECK_EQ_I(groups_seen, cases[k].want_groups);
        CHECK_MSG(named > n / 2, "%s: %d of %d requests name the prompt", cases[k].gen, named, n);
        free(group_names);
        free(sess_names);
        trace_close(so);
        trace_close(sn);
    }
}
