/* mooncake.c — Mooncake (FAST'25) JSONL traces: {"timestamp": ms, "input_length", "output_length",
 * "hash_ids": [...]} per line, one hash id per 512-token block, a hash covering its block and every
 * block before it (equal leading ids = shared prefix).
 *
 * Responsible for: parsing each line (cJSON), arrivals = timestamp × 1e6 × time_scale ns, and the
 * reusable prefix: history = (number of leading hash ids already seen by an earlier request) × 512,
 * capped at input_length − 1 so at least one token is prefilled; every request is its own session
 * (turn 0). Seen ids are kept in a hash set (memory grows with the distinct blocks).
 * Not responsible for: session inference (the canonical mooncake_conversation.csv carries one) or
 * the order machinery (trace_io.c: a file out of time order is read through an index, and "earlier"
 * then means earlier in time, as the history is computed in release order).
 * The whole blocks of each input are also handed out by name (TraceRequest.prefix_blocks: a hash id
 * named through sim/base/blockhash.h), for a consumer that finds shared blocks by name.
 * Invariants: history is a multiple of 512 or input_length − 1; new_input = input_length − history >= 1
 * (an input_length of 0 gives 1).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "sim/base/blockhash.h"
#include "traces/trace_int.h"

typedef struct MoonSeen {
    uint64_t *slot; /* id + 1; 0 = empty (ids are >= 0) */
    size_t cap, n;
} MoonSeen;

typedef struct MooncakeTrace {
    TraceSource *src;
    const char *path;
    TraceLines lines;
    TraceOrder order;
    MoonSeen seen;
    double timestamp_ms;
    int64_t input_len, output_len;
    int64_t *ids;
    uint64_t *names;   /* the block names of the last request's whole blocks (ids_cap of them) */
    size_t n_ids, ids_cap;
    uint64_t next_session;
    char session_id[24]; /* the last request's 0-based line, handed out as its session id */
} MooncakeTrace;

static uint64_t moon_mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xFF51AFD7ED558CCDull;
    x ^= x >> 33;
    return x;
}

static int moon_seen_has(const MoonSeen *m, int64_t id)
{
    if (!m->cap) return 0;
    uint64_t key = (uint64_t)id + 1;
    for (size_t j = moon_mix(key) & (m->cap - 1);; j = (j + 1) & (m->cap - 1)) {
        if (m->slot[j] == key) return 1;
        if (m->slot[j] == 0) return 0;
    }
}

static int moon_seen_add(MoonSeen *m, int64_t id)
{
    if ((m->n + 1) * 2 > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 1024;
        uint64_t *slot = calloc(cap, sizeof *slot);
        if (!slot) return -1;
        for (size_t i = 0; i < m->cap; i++) {
            if (!m->slot[i]) continue;
            size_t j = moon_mix(m->slot[i]) & (cap - 1);
            while (slot[j]) j = (j + 1) & (cap - 1);
            slot[j] = m->slot[i];
        }
        free(m->slot);
        m->slot = slot;
        m->cap = cap;
    }
    uint64_t key = (uint64_t)id + 1;
    size_t j = moon_mix(key) & (m->cap - 1);
    while (m->slot[j]) {
        if (m->slot[j] == key) return 0;
        j = (j + 1) & (m->cap - 1);
    }
    m->slot[j] = key;
    m->n++;
    return 0;
}

/* A JSON number that is a non-negative integer below 2^53. */
static int moon_int(const cJSON *v, int64_t *out)
{
    if (!cJSON_IsNumber(v)) return -1;
    double d = v->valuedouble;
    if (!(d >= 0.0) || d > 9007199254740992.0 || floor(d) != d) return -1;
    *out = (int64_t)d;
    return 0;
}

static int moon_parse(void *ctx, char *line, int64_t line_no, KvErr *e)
{
    MooncakeTrace *m = ctx;
    if (trace_is_blank(line)) return 0;
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithOpts(line, &end, 1);
    if (!j) {
        const char *at = end ? end : cJSON_GetErrorPtr();
        long col = at && at >= line ? (long)(at - line) + 1 : 0;
        return kv_err(e, "%s: line %lld: invalid JSON at column %ld", m->path, (long long)line_no, col);
    }
    int rc = -1;
    const cJSON *v;
    if (!cJSON_IsObject(j)) {
        kv_err(e, "%s: line %lld: expected a JSON object {\"timestamp\", \"input_length\", \"output_length\", \"hash_ids\"}",
               m->path, (long long)line_no);
        goto done;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "timestamp");
    if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0.0) || !isfinite(v->valuedouble)) {
        kv_err(e, "%s: line %lld: field timestamp: expected a non-negative number of milliseconds", m->path, (long long)line_no);
        goto done;
    }
    m->timestamp_ms = v->valuedouble;
    if (m->timestamp_ms > TRACE_MAX_TIME_NS / 1e6) {
        trace_err_range(e, m->path, line_no, "field timestamp (ms)", m->timestamp_ms, 0, TRACE_MAX_TIME_NS / 1e6);
        goto done;
    }
    static const char *const names[2] = {"input_length", "output_length"};
    int64_t *dst[2] = {&m->input_len, &m->output_len};
    for (int k = 0; k < 2; k++) {
        if (moon_int(cJSON_GetObjectItemCaseSensitive(j, names[k]), dst[k]) != 0) {
            kv_err(e, "%s: line %lld: field %s: expected a non-negative integer", m->path, (long long)line_no, names[k]);
            goto done;
        }
    }
    {
        const int64_t toks[3] = {m->input_len, m->output_len, 0};
        static const char *const tok_names[3] = {"input_length", "output_length", NULL};
        if (trace_check_tokens(e, m->path, line_no, "field", tok_names, toks) != 0) goto done;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "hash_ids");
    if (!cJSON_IsArray(v)) {
        kv_err(e, "%s: line %lld: field hash_ids: expected an array of block ids", m->path, (long long)line_no);
        goto done;
    }
    m->n_ids = 0;
    int idx = 0;
    for (const cJSON *it = v->child; it; it = it->next, idx++) {
        int64_t id;
        if (moon_int(it, &id) != 0) {
            kv_err(e, "%s: line %lld: field hash_ids[%d]: expected a non-negative integer", m->path, (long long)line_no, idx);
            goto done;
        }
        if (m->n_ids == m->ids_cap) {
            size_t cap = m->ids_cap ? m->ids_cap * 2 : 256;
            int64_t *ids = realloc(m->ids, cap * sizeof *ids);
            if (ids) m->ids = ids;
            uint64_t *nm = ids ? realloc(m->names, cap * sizeof *nm) : NULL;
            if (!nm) {
                kv_err(e, "%s: line %lld: out of memory", m->path, (long long)line_no);
                goto done;
            }
            m->names = nm;
            m->ids_cap = cap;
        }
        m->ids[m->n_ids++] = id;
    }
    rc = 1;
done:
    cJSON_Delete(j);
    return rc;
}

static int moon_step(void *ctx, int64_t line_no, int64_t *key_ns, int *timed, KvErr *e)
{
    MooncakeTrace *m = ctx;
    *key_ns = trace_ns_from_s(m->timestamp_ms / 1e3, m->src->opt.time_scale);
    if (*key_ns < 0)
        return kv_err(e, "%s: line %lld: field timestamp: value %.10g ms × time_scale %g is out of range [0, %.10g] ms",
                      m->path, (long long)line_no, m->timestamp_ms, m->src->opt.time_scale, TRACE_MAX_TIME_NS / 1e6);
    *timed = 1;
    return 0;
}

static void moon_reset(void *ctx) {}

static const TraceOrderOps moon_order_ops = {moon_parse, moon_step, moon_reset};

static int moon_next(void *impl, TraceRequest *out, KvErr *e)
{
    MooncakeTrace *m = impl;
    int64_t key, line_no;
    int timed;
    int r = trace_order_next(&m->order, &key, &timed, &line_no, e);
    if (r <= 0) return r;
    size_t k = 0;
    while (k < m->n_ids && moon_seen_has(&m->seen, m->ids[k])) k++;
    int64_t hist = (int64_t)k * TRACE_MOONCAKE_BLOCK_TOKENS;
    if (hist > m->input_len - 1) hist = kv_max_i64(0, m->input_len - 1);
    for (size_t i = k; i < m->n_ids; i++)
        if (moon_seen_add(&m->seen, m->ids[i]) != 0) return kv_err(e, "%s: line %lld: out of memory", m->path, (long long)line_no);
    out->session = m->next_session++;
    snprintf(m->session_id, sizeof m->session_id, "%lld", (long long)(line_no - 1));
    out->session_id = m->session_id;
    out->turn = 0;
    out->arrival_ns = key;
    out->think_ns = 0;
    out->history_tokens = hist;
    out->new_input_tokens = kv_max_i64(1, m->input_len - hist);
    out->output_tokens = m->output_len > 0 ? m->output_len : 1;
    /* the input's whole blocks by name (a partial last block is nobody's to share: vLLM hashes
     * whole blocks only); the context is the input, history included */
    size_t whole = (size_t)((out->history_tokens + out->new_input_tokens) / TRACE_MOONCAKE_BLOCK_TOKENS);
    if (whole > m->n_ids) whole = m->n_ids;
    for (size_t i = 0; i < whole; i++) m->names[i] = kv_block_hash(TRACE_HASH_ID_SPACE, (uint64_t)m->ids[i]);
    out->prefix_blocks = whole ? m->names : NULL;
    out->n_prefix_blocks = (int32_t)whole;
    out->prefix_block_tokens = TRACE_MOONCAKE_BLOCK_TOKENS;
    return 1;
}

static void moon_close(void *impl)
{
    MooncakeTrace *m = impl;
    trace_order_free(&m->order);
    trace_lines_close(&m->lines);
    free(m->seen.slot);
    free(m->ids);
    free(m->names);
    free(m);
}

static const TraceBackend moon_backend = {"mooncake", moon_next, moon_close};

int trace_mooncake_open(TraceSource *s, KvErr *e)
{
    MooncakeTrace *m = calloc(1, sizeof *m);
    if (!m) return kv_err(e, "%s: out of memory", s->opt.source);
    m->src = s;
    m->path = s->opt.source;
    s->be = &moon_backend;
    s->impl = m;
    if (trace_lines_open(&m->lines, m->path, e) != 0) return -1;
    if (trace_order_start(&m->order, &m->lines, &moon_order_ops, m, e) != 0) return -1;
    if (m->order.rows == 0) return kv_err(e, "%s: line 1: empty, expected one JSON object per line", m->path);
    s->timed_rows = m->order.rows; /* every row carries its arrival */
    snprintf(s->describe, sizeof s->describe,
             "mooncake %s: %lld requests, one session each, history = prefix of %d-token blocks seen before; %s; time_scale %g",
             m->path, (long long)m->order.rows, TRACE_MOONCAKE_BLOCK_TOKENS,
             m->order.indexed ? "indexed (out of time order)" : "streamed in file order", s->opt.time_scale);
    return 0;
}
