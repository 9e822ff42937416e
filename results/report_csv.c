/* report_csv.c — requests.csv: one column table writes its header and every row (one line per
 * request as it completes, written aside and renamed at the end); see report.h and docs/formats.md. */
#include "results/report.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* how a requests.csv column is written */
typedef enum {
    RC_POLICY,   /* the run's policy (ReqCsv.policy) */
    RC_U64,      /* a uint64_t field */
    RC_INT,      /* an int field */
    RC_I64,      /* an int64_t field */
    RC_TEXT,     /* a const char * field as it is (names without commas) */
    RC_CSV_TEXT, /* a const char * field quoted as CSV needs (NULL: empty) */
    RC_NS,       /* an int64_t of nanoseconds as seconds, nine decimals */
    RC_NS_DBL,   /* a double of nanoseconds as seconds, nine decimals */
    RC_ARRIVAL,  /* arrival_ns, or with load columns the load process's offered_ns */
    RC_E2E,      /* done_ns − arrival_ns (the release): summary.json's e2e_s per request */
} ReqColKind;

/* requests.csv's columns, in their order: the header and every row are written from this table */
static const struct {
    const char *name;
    ReqColKind kind;
    size_t off;       /* offsetof(SimRequestRow, ...) */
    int load_only;    /* only with load columns (ReqCsv.load_columns) */
} k_req_cols[] = {
    {"policy", RC_POLICY, 0, 0},
    {"request", RC_U64, offsetof(SimRequestRow, id), 0},
    {"session", RC_U64, offsetof(SimRequestRow, session), 0},
    {"session_id", RC_CSV_TEXT, offsetof(SimRequestRow, session_id), 0},
    {"turn", RC_INT, offsetof(SimRequestRow, turn), 0},
    {"replica", RC_INT, offsetof(SimRequestRow, replica), 0},
    {"arrival_s", RC_ARRIVAL, 0, 0},
    {"history_tokens", RC_I64, offsetof(SimRequestRow, history_tokens), 0},
    {"new_tokens", RC_I64, offsetof(SimRequestRow, new_tokens), 0},
    {"output_tokens", RC_I64, offsetof(SimRequestRow, output_tokens), 0},
    {"restore_from", RC_TEXT, offsetof(SimRequestRow, restore_from), 0},
    {"recomputed_tokens", RC_I64, offsetof(SimRequestRow, recomputed_tokens), 0},
    {"loaded_tokens", RC_I64, offsetof(SimRequestRow, loaded_tokens), 0},
    {"prefix_hit_tokens", RC_I64, offsetof(SimRequestRow, prefix_hit_tokens), 0},
    {"preemptions", RC_INT, offsetof(SimRequestRow, preemptions), 0},
    {"queue_s", RC_NS, offsetof(SimRequestRow, queue_ns), 0},
    {"restore_s", RC_NS, offsetof(SimRequestRow, restore_ns), 0},
    {"prefill_s", RC_NS, offsetof(SimRequestRow, prefill_ns), 0},
    {"ttft_s", RC_NS, offsetof(SimRequestRow, ttft_ns), 0},
    {"e2e_s", RC_E2E, 0, 0},
    {"tbt_mean_s", RC_NS_DBL, offsetof(SimRequestRow, tbt_mean_ns), 0},
    {"tbt_max_s", RC_NS, offsetof(SimRequestRow, tbt_max_ns), 0},
    {"done_s", RC_NS, offsetof(SimRequestRow, done_ns), 0},
    {"restore_lower_bound_s", RC_NS_DBL, offsetof(SimRequestRow, lb_restore_ns), 0},
    {"session_wait_s", RC_NS, offsetof(SimRequestRow, session_wait_ns), 1},
};

void report_csv_header(FILE *f, int seed_col, int load_columns)
{
    if (seed_col) fputs("seed,", f);
    int first = 1;
    for (size_t i = 0; i < KV_ARRAY_LEN(k_req_cols); i++) {
        if (k_req_cols[i].load_only && !load_columns) continue;
        if (!first) fputc(',', f);
        fputs(k_req_cols[i].name, f);
        first = 0;
    }
    fputc('\n', f);
}

int report_csv_open_load(ReqCsv *c, const char *path, int load_columns, KvErr *e)
{
    memset(c, 0, sizeof *c);
    if (kv_atomic_open(&c->af, path, e) != 0) return -1;
    c->load_columns = load_columns;
    report_csv_header(c->af.f, 0, load_columns);
    return 0;
}

int report_csv_open(ReqCsv *c, const char *path, KvErr *e) { return report_csv_open_load(c, path, 0, e); }

int report_csv_load_columns(const SimConfig *cfg) { return sim_load_mode(cfg) != SIM_LOAD_SESSION; }



static char *app_i64(char *p, int64_t v)
{
    if (v < 0) {
        *p++ = '-';
        return kv_app_u64(p, (uint64_t)0 - (uint64_t)v);
    }
    return kv_app_u64(p, (uint64_t)v);
}

/* ns as seconds with nine decimals: the text "%.9f" prints for (double)ns / 1e9. For 0 <= ns < 8e15
 * that is exactly ns / 10^9 and ns % 10^9 (the double is within 2^-31 s of the exact quotient, which
 * has nine decimals, so printf rounds back to it); other values go through printf. */
char *report_app_seconds9(char *p, int64_t ns)
{
    if (ns < 0 || ns >= 8000000000000000LL) return p + sprintf(p, "%.9f", (double)ns / 1e9);
    p = kv_app_u64(p, (uint64_t)(ns / 1000000000));
    *p++ = '.';
    uint64_t frac = (uint64_t)(ns % 1000000000);
    for (int i = 8; i >= 0; i--) {
        p[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    return p + 9;
}


int report_csv_row(void *ctx, const SimRequestRow *r, KvErr *e)
{
    ReqCsv *c = ctx;
    FILE *f = c->af.f;
    /* every number formatted here (printf only for values out of the exact paths' ranges), the same
     * text as "%llu" / "%lld" / "%.9f" print; text goes out on its own */
    char buf[2048], *p = buf; /* room for every number column: two %.9f doubles of at most 320 characters each */
    if (c->seed_col) {
        p = kv_app_u64(p, c->seed);
        *p++ = ',';
    }
    int first = 1;
    for (size_t i = 0; i < KV_ARRAY_LEN(k_req_cols); i++) {
        if (k_req_cols[i].load_only && !c->load_columns) continue;
        if (!first) *p++ = ',';
        first = 0;
        const void *at = (const char *)r + k_req_cols[i].off;
        const char *text = NULL;
        switch (k_req_cols[i].kind) {
        case RC_POLICY: text = c->policy; break;
        case RC_TEXT: text = *(const char *const *)at; break;
        case RC_CSV_TEXT:
            fwrite(buf, 1, (size_t)(p - buf), f);
            p = buf;
            kv_csv_field(f, *(const char *const *)at ? *(const char *const *)at : "");
            break;
        case RC_U64: p = kv_app_u64(p, *(const uint64_t *)at); break;
        case RC_INT: p = app_i64(p, *(const int *)at); break;
        case RC_I64: p = app_i64(p, *(const int64_t *)at); break;
        case RC_NS: p = report_app_seconds9(p, *(const int64_t *)at); break;
        case RC_NS_DBL: p = kv_app_fixed(p, *(const double *)at / 1e9, 9); break;
        case RC_ARRIVAL: p = report_app_seconds9(p, c->load_columns ? r->offered_ns : r->arrival_ns); break;
        case RC_E2E: p = report_app_seconds9(p, r->done_ns - r->arrival_ns); break;
        }
        if (text) {
            size_t len = strlen(text);
            if (len > 256) { /* the names are short; a long one goes out on its own */
                fwrite(buf, 1, (size_t)(p - buf), f);
                fputs(text, f);
                p = buf;
            } else {
                memcpy(p, text, len);
                p += len;
            }
        }
    }
    *p++ = '\n';
    if (fwrite(buf, 1, (size_t)(p - buf), f) != (size_t)(p - buf)) return kv_err(e, "%s: write failed: %s", c->af.path, strerror(errno));
    /* checked after every row, so a failure (a flush inside this fwrite that failed although the row
     * was buffered) happened in this call and errno is still its cause */
    if (ferror(f)) return kv_err(e, "%s: write failed: %s", c->af.path, strerror(errno));
    c->rows++;
    return 0;
}

int report_csv_commit(ReqCsv *c, KvErr *e) { return kv_atomic_commit(&c->af, e); }
void report_csv_abort(ReqCsv *c) { kv_atomic_abort(&c->af); }
