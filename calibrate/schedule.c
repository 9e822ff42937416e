/* schedule.c — reading kvsim's schedule (JSON lines) for kvcal execute; see schedule.h. */
#include "calibrate/schedule.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct Ctx {
    const char *path;
    int line;
    KvErr *e;
} Ctx;

static int bad(const Ctx *c, const char *field, const char *want, const cJSON *got)
{
    char *txt = got ? cJSON_PrintUnformatted(got) : NULL;
    kv_err(c->e, "%s: line %d: field %s: expected %s, got %s", c->path, c->line, field, want, txt ? txt : "nothing");
    free(txt);
    return -1;
}

/* an integer field in [lo, hi] */
static int get_int(const Ctx *c, const cJSON *o, const char *key, int64_t lo, int64_t hi, int64_t *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    char want[96];
    snprintf(want, sizeof want, "an integer in [%lld, %lld]", (long long)lo, (long long)hi);
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < (double)lo ||
        v->valuedouble > (double)hi)
        return bad(c, key, want, v);
    *out = (int64_t)v->valuedouble;
    return 0;
}

static int get_i32(const Ctx *c, const cJSON *o, const char *key, int64_t lo, int64_t hi, int *out)
{
    int64_t v;
    if (get_int(c, o, key, lo, hi, &v) != 0) return -1;
    *out = (int)v;
    return 0;
}

static int get_u64(const Ctx *c, const cJSON *o, const char *key, uint64_t *out)
{
    int64_t v;
    if (get_int(c, o, key, 0, (int64_t)1 << 52, &v) != 0) return -1;
    *out = (uint64_t)v;
    return 0;
}

/* a string field, one of `names` (NULL-terminated; NULL names: any string that fits) */
static int get_enum(const Ctx *c, const cJSON *o, const char *key, const char *const *names, int *idx, char *buf, size_t cap)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsString(v)) return bad(c, key, "a string", v);
    if (!names) {
        if (strlen(v->valuestring) >= cap) return bad(c, key, "a shorter string", v);
        snprintf(buf, cap, "%s", v->valuestring);
        return 0;
    }
    char want[160] = "one of";
    for (int i = 0; names[i]; i++) {
        if (!strcmp(v->valuestring, names[i])) {
            *idx = i;
            return 0;
        }
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s \"%s\"", i ? "," : "", names[i]);
    }
    return bad(c, key, want, v);
}

static const cJSON *get_array(const Ctx *c, const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsArray(v)) {
        bad(c, key, "an array", v);
        return NULL;
    }
    return v;
}

static int get_cause(const Ctx *c, const cJSON *o, const char *key, SchCause *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsObject(v)) return bad(c, key, "an object {\"unit\":N}, {\"iter\":N} or {\"at_ns\":T}", v);
    memset(out, 0, sizeof *out);
    if (cJSON_GetObjectItemCaseSensitive(v, "unit")) {
        out->kind = SCH_CAUSE_UNIT;
        return get_u64(c, v, "unit", &out->id);
    }
    if (cJSON_GetObjectItemCaseSensitive(v, "iter")) {
        out->kind = SCH_CAUSE_ITER;
        return get_u64(c, v, "iter", &out->id);
    }
    if (cJSON_GetObjectItemCaseSensitive(v, "at_ns")) return get_int(c, v, "at_ns", 0, INT64_MAX / 4, &out->at_ns);
    return bad(c, key, "an object {\"unit\":N}, {\"iter\":N} or {\"at_ns\":T}", v);
}

static int id_list(const Ctx *c, const cJSON *o, const char *key, uint64_t **out, int *n)
{
    const cJSON *a = get_array(c, o, key);
    if (!a) return -1;
    *n = cJSON_GetArraySize(a);
    *out = calloc((size_t)(*n ? *n : 1), sizeof **out);
    if (!*out) return kv_err(c->e, "out of memory");
    int k = 0;
    const cJSON *x;
    cJSON_ArrayForEach(x, a)
    {
        if (!cJSON_IsNumber(x) || x->valuedouble < 1 || x->valuedouble != floor(x->valuedouble))
            return bad(c, key, "an array of unit ids (integers >= 1)", x);
        (*out)[k++] = (uint64_t)x->valuedouble;
    }
    return 0;
}

#define GROW(arr, n, cap)                                                                                              \
    do {                                                                                                               \
        if ((n) == (cap)) {                                                                                            \
            int nc_ = (cap) ? (cap) * 2 : 64;                                                                          \
            void *p_ = realloc((arr), (size_t)nc_ * sizeof *(arr));                                                    \
            if (!p_) return kv_err(c->e, "out of memory");                                                             \
            (arr) = p_;                                                                                                \
            (cap) = nc_;                                                                                               \
        }                                                                                                              \
    } while (0)

typedef struct Caps {
    int reqs, units, iters;
} Caps;

static int parse_header(const Ctx *c, const cJSON *o, Schedule *s)
{
    char fmt[32];
    int64_t ver;
    if (get_enum(c, o, "format", NULL, NULL, fmt, sizeof fmt) != 0) return -1;
    if (strcmp(fmt, "kvsim-schedule")) return bad(c, "format", "\"kvsim-schedule\"", cJSON_GetObjectItem(o, "format"));
    if (get_int(c, o, "version", 1, 1, &ver) != 0) return -1;
    if (get_enum(c, o, "model", NULL, NULL, s->model, sizeof s->model) ||
        get_enum(c, o, "policy", NULL, NULL, s->policy, sizeof s->policy) || get_i32(c, o, "layers", 1, 256, &s->layers) ||
        get_i32(c, o, "stages", 1, SCH_MAX_STAGES, &s->stages) || get_i32(c, o, "tp", 1, 64, &s->tp) ||
        get_i32(c, o, "replicas", 1, 1 << 16, &s->replicas) || get_i32(c, o, "hidden", 1, 1 << 20, &s->hidden) ||
        get_i32(c, o, "heads", 1, 4096, &s->heads) || get_i32(c, o, "kv_heads", 1, 4096, &s->kv_heads) ||
        get_i32(c, o, "head_dim", 1, 4096, &s->head_dim) || get_i32(c, o, "intermediate", 1, 1 << 22, &s->intermediate) ||
        get_i32(c, o, "norms_per_layer", 0, 8, &s->norms_per_layer) || get_i32(c, o, "rope", 0, 1, &s->rope) ||
        get_int(c, o, "kv_bytes_per_token_layer", 1, 1 << 30, &s->kv_bytes_per_token_layer) ||
        get_int(c, o, "hidden_bytes_per_token_layer", 1, 1 << 30, &s->hidden_bytes_per_token_layer) ||
        get_int(c, o, "iter_overhead_ns", 0, INT64_MAX / 4, &s->iter_overhead_ns))
        return -1;
    if (s->heads % s->kv_heads) return bad(c, "kv_heads", "a divisor of heads", cJSON_GetObjectItem(o, "kv_heads"));
    if (cJSON_GetObjectItemCaseSensitive(o, "token_budget") && get_int(c, o, "token_budget", 1, 1 << 30, &s->token_budget) != 0) return -1;
    static const char *const orders[] = {"fifo", "oldest", "policy", NULL};
    if (cJSON_GetObjectItemCaseSensitive(o, "io_order")) {
        int oi;
        if (get_enum(c, o, "io_order", orders, &oi, NULL, 0) != 0) return -1;
        snprintf(s->io_order, sizeof s->io_order, "%s", orders[oi]);
    }
    /* nic_per_stage (optional, 0 when absent: an older kvsim, or no remote tier): each stage its own NIC */
    if (cJSON_GetObjectItemCaseSensitive(o, "nic_per_stage") && get_i32(c, o, "nic_per_stage", 0, 1, &s->nic_per_stage) != 0) return -1;
    /* stage_layers: the layers of each pipeline stage, in order (stage st holds layers
     * [stage_first[st], stage_first[st + 1])) */
    s->stage_first[0] = 0;
    s->stage_first[1] = s->layers;
    if (s->stages == 1 && !cJSON_GetObjectItemCaseSensitive(o, "stage_layers")) return 0; /* one stage: all layers */
    const cJSON *sl = get_array(c, o, "stage_layers"), *x;
    if (!sl) return -1;
    if (cJSON_GetArraySize(sl) != s->stages) return bad(c, "stage_layers", "one entry per stage of the header", sl);
    int st = 0;
    cJSON_ArrayForEach(x, sl)
    {
        if (!cJSON_IsNumber(x) || x->valuedouble != floor(x->valuedouble) || x->valuedouble < 1 || x->valuedouble > s->layers)
            return bad(c, "stage_layers", "an array of layer counts (integers >= 1)", x);
        s->stage_first[st + 1] = s->stage_first[st] + (int)x->valuedouble;
        st++;
    }
    if (s->stage_first[s->stages] != s->layers) return bad(c, "stage_layers", "layer counts that add up to layers", sl);
    return 0;
}

int schedule_stage_of(const Schedule *s, int layer)
{
    int st = 0;
    while (st + 1 < s->stages && layer >= s->stage_first[st + 1]) st++;
    return st;
}

static int parse_request(const Ctx *c, const cJSON *o, Schedule *s, Caps *cp)
{
    GROW(s->reqs, s->n_reqs, cp->reqs);
    SchReq *r = &s->reqs[s->n_reqs];
    memset(r, 0, sizeof *r);
    if (get_u64(c, o, "req", &r->id) || get_u64(c, o, "session", &r->session) || get_i32(c, o, "turn", 0, 1 << 30, &r->turn) ||
        get_int(c, o, "hist", 0, 1 << 30, &r->hist) || get_int(c, o, "new", 1, 1 << 30, &r->nnew) ||
        get_int(c, o, "out", 1, 1 << 30, &r->nout) || get_int(c, o, "release_ns", 0, INT64_MAX / 4, &r->release_ns) ||
        get_int(c, o, "admit_ns", r->release_ns, INT64_MAX / 4, &r->admit_ns) ||
        get_enum(c, o, "restore", NULL, NULL, r->restore, sizeof r->restore))
        return -1;
    if (cJSON_GetObjectItem(o, "replica") && get_i32(c, o, "replica", 0, s->replicas - 1, &r->replica)) return -1;
    static const char *const tw_keys[] = {"io_chunk", "comp_chunk", "io_depth", "comp_budget"};
    int64_t *tw_vals[] = {&r->io_chunk, &r->comp_chunk, &r->io_depth, &r->comp_budget};
    for (int k = 0; k < 4; k++) /* optional (token-wise restorations): chunks >= 1 token, comp_chunk 0 = the budget */
        if (cJSON_GetObjectItem(o, tw_keys[k]) && get_int(c, o, tw_keys[k], k == 1 ? 0 : 1, 1 << 30, tw_vals[k])) return -1;
    if (cJSON_GetObjectItem(o, "low_prio")) {
        if (get_i32(c, o, "low_prio", 0, 1, &r->low_prio)) return -1;
        r->has_low_prio = 1;
    }
    if (schedule_req(s, r->id)) return bad(c, "req", "an id not used by an earlier request", cJSON_GetObjectItem(o, "req"));
    s->n_reqs++;
    return 0;
}

static int parse_done(const Ctx *c, const cJSON *o, Schedule *s)
{
    uint64_t id;
    if (get_u64(c, o, "req", &id) != 0) return -1;
    SchReq *r = (SchReq *)schedule_req(s, id);
    if (!r) return bad(c, "req", "the id of a request record before it", cJSON_GetObjectItem(o, "req"));
    if (r->done) return bad(c, "req", "a request not done yet", cJSON_GetObjectItem(o, "req"));
    if (get_int(c, o, "restored_ns", 0, INT64_MAX / 4, &r->restored_ns) ||
        get_int(c, o, "first_ns", r->release_ns, INT64_MAX / 4, &r->first_ns) ||
        get_int(c, o, "last_ns", r->release_ns, INT64_MAX / 4, &r->last_ns) ||
        get_int(c, o, "ttft_ns", 0, INT64_MAX / 4, &r->ttft_ns) || get_int(c, o, "restore_ns", 0, INT64_MAX / 4, &r->restore_ns) ||
        get_int(c, o, "meet_tokens", 0, 1 << 30, &r->meet_tokens))
        return -1;
    r->done = 1;
    return 0;
}

static int parse_unit(const Ctx *c, const cJSON *o, Schedule *s, Caps *cp)
{
    static const char *const kinds[] = {"load", "load_tok", NULL}, *const states[] = {"kv", "hidden", "kv_tok", NULL},
                             *const tiers[] = {"dram", "ssd", "remote", NULL}, *const chans[] = {"ssd", "h2d", "nic_in", NULL};
    GROW(s->units, s->n_units, cp->units);
    SchUnit *u = &s->units[s->n_units];
    memset(u, 0, sizeof *u);
    if (get_u64(c, o, "unit", &u->id) || get_u64(c, o, "req", &u->req) || get_u64(c, o, "session", &u->session) ||
        get_enum(c, o, "kind", kinds, &u->tokwise, NULL, 0) || get_i32(c, o, "layer", -1, s->layers - 1, &u->layer) ||
        get_i32(c, o, "stage", 0, s->stages - 1, &u->stage) || get_enum(c, o, "state", states, &u->state, NULL, 0) ||
        get_int(c, o, "tok_lo", 0, 1 << 30, &u->tok_lo) || get_int(c, o, "tok_hi", u->tok_lo + 1, 1 << 30, &u->tok_hi) ||
        get_enum(c, o, "tier", tiers, &u->tier, NULL, 0) || get_enum(c, o, "file", NULL, NULL, u->file, sizeof u->file) ||
        get_int(c, o, "offset", 0, (int64_t)1 << 46, &u->offset) || get_int(c, o, "bytes", 1, (int64_t)1 << 40, &u->bytes) ||
        get_int(c, o, "issue_ns", 0, INT64_MAX / 4, &u->issue_ns) || get_cause(c, o, "after", &u->after))
        return -1;
    if (u->id < 1) return bad(c, "unit", "a unit id >= 1", cJSON_GetObjectItem(o, "unit"));
    if (!schedule_req(s, u->req)) return bad(c, "req", "the id of a request record before it", cJSON_GetObjectItem(o, "req"));
    if (strchr(u->file, '/') || !strcmp(u->file, "..") || !u->file[0])
        return bad(c, "file", "a plain file name (no directory)", cJSON_GetObjectItem(o, "file"));
    const cJSON *hops = get_array(c, o, "hops");
    if (!hops) return -1;
    int n = cJSON_GetArraySize(hops);
    if (n < 1 || n > SCH_MAX_HOPS) return bad(c, "hops", "1 to 3 hops", hops);
    const cJSON *h;
    cJSON_ArrayForEach(h, hops)
    {
        SchHop *p = &u->hop[u->nhops++];
        if (!cJSON_IsObject(h)) return bad(c, "hops", "an array of objects", h);
        if (get_enum(c, h, "ch", chans, &p->ch, NULL, 0) || get_int(c, h, "bytes", 1, (int64_t)1 << 40, &p->bytes) ||
            get_int(c, h, "start_ns", 0, INT64_MAX / 4, &p->start_ns) || get_int(c, h, "end_ns", p->start_ns, INT64_MAX / 4, &p->end_ns))
            return -1;
    }
    if (u->hop[u->nhops - 1].ch != SCH_CH_H2D) return bad(c, "hops", "a chain ending with an h2d hop", hops);
    s->n_units++;
    return 0;
}

static int parse_iter(const Ctx *c, const cJSON *o, Schedule *s, Caps *cp)
{
    static const char *const kinds[] = {"decode", "recompute", "prefill", NULL},
                             *const ops[] = {"recompute", "projection", "dequantize", NULL};
    GROW(s->iters, s->n_iters, cp->iters);
    SchIter *it = &s->iters[s->n_iters];
    memset(it, 0, sizeof *it);
    s->n_iters++; /* owned from here on (freed by schedule_free) */
    if (get_u64(c, o, "iter", &it->id) || get_i32(c, o, "replica", 0, s->replicas - 1, &it->replica) ||
        get_int(c, o, "start_ns", 0, INT64_MAX / 4, &it->start_ns) || get_int(c, o, "end_ns", it->start_ns, INT64_MAX / 4, &it->end_ns) ||
        get_int(c, o, "overhead_ns", 0, INT64_MAX / 4, &it->overhead_ns) || get_int(c, o, "pre_ns", 0, INT64_MAX / 4, &it->pre_ns) ||
        get_cause(c, o, "after", &it->after) || id_list(c, o, "after_units", &it->after_units, &it->nafter))
        return -1;
    if (it->id != (uint64_t)s->n_iters)
        return bad(c, "iter", "the next iteration id (iterations are numbered 1, 2, ... in the file's order)",
                   cJSON_GetObjectItem(o, "iter"));
    const cJSON *items = get_array(c, o, "items"), *x;
    if (!items) return -1;
    it->nitems = cJSON_GetArraySize(items);
    if (it->nitems < 1) return bad(c, "items", "at least one item", items);
    it->items = calloc((size_t)it->nitems, sizeof *it->items);
    if (!it->items) return kv_err(c->e, "out of memory");
    int k = 0;
    cJSON_ArrayForEach(x, items)
    {
        SchItem *m = &it->items[k++];
        if (!cJSON_IsObject(x)) return bad(c, "items", "an array of objects", x);
        if (get_u64(c, x, "req", &m->req) || get_enum(c, x, "kind", kinds, &m->kind, NULL, 0) ||
            get_int(c, x, "tokens", 1, 1 << 30, &m->tokens) || get_int(c, x, "ctx", 0, 1 << 30, &m->ctx) ||
            get_i32(c, x, "lw", 0, 1, &m->lw))
            return -1;
        if (!schedule_req(s, m->req)) return bad(c, "items[].req", "the id of a request record before it", x);
    }
    /* stage-parallel lanes: per request (item order) and layer, a recompute of that layer for the
     * history on the layer's stage (walk.c stage_lanes) */
    const cJSON *lanes = get_array(c, o, "lanes");
    if (!lanes) return -1;
    it->nlanes = cJSON_GetArraySize(lanes);
    it->lanes = calloc((size_t)(it->nlanes ? it->nlanes : 1), sizeof *it->lanes);
    if (!it->lanes) return kv_err(c->e, "out of memory");
    k = 0;
    cJSON_ArrayForEach(x, lanes)
    {
        SchLane *p = &it->lanes[k++];
        if (!cJSON_IsObject(x)) return bad(c, "lanes", "an array of objects", x);
        if (get_i32(c, x, "stage", 0, s->stages - 1, &p->stage) || get_i32(c, x, "layer", 0, s->layers - 1, &p->layer) ||
            get_u64(c, x, "req", &p->req) || get_int(c, x, "tokens", 1, 1 << 30, &p->tokens) ||
            get_int(c, x, "ctx", 0, 1 << 30, &p->ctx))
            return -1;
        if (schedule_stage_of(s, p->layer) != p->stage)
            return bad(c, "lanes[].stage", "the stage of the lane's layer (header stage_layers)", cJSON_GetObjectItem(x, "stage"));
        int in_items = 0;
        for (int i = 0; i < it->nitems; i++) in_items |= it->items[i].req == p->req && it->items[i].lw;
        if (!in_items) return bad(c, "lanes[].req", "a request among the iteration's layer-wise items", cJSON_GetObjectItem(x, "req"));
    }
    const cJSON *layers = get_array(c, o, "layers");
    if (!layers) return -1;
    if (cJSON_GetArraySize(layers) != s->layers) return bad(c, "layers", "one entry per layer of the header", layers);
    it->layers = calloc((size_t)s->layers, sizeof *it->layers);
    if (!it->layers) return kv_err(c->e, "out of memory");
    k = 0;
    cJSON_ArrayForEach(x, layers)
    {
        SchLayer *ly = &it->layers[k++];
        if (!cJSON_IsObject(x)) return bad(c, "layers", "an array of objects", x);
        if (get_int(c, x, "start_ns", -1, INT64_MAX / 4, &ly->start_ns) || get_int(c, x, "end_ns", -1, INT64_MAX / 4, &ly->end_ns) ||
            get_int(c, x, "ns", 0, INT64_MAX / 4, &ly->ns) || id_list(c, x, "waits", &ly->waits, &ly->nwaits))
            return -1;
        const cJSON *work = get_array(c, x, "work"), *w;
        if (!work) return -1;
        ly->nwork = cJSON_GetArraySize(work);
        ly->work = calloc((size_t)(ly->nwork ? ly->nwork : 1), sizeof *ly->work);
        if (!ly->work) return kv_err(c->e, "out of memory");
        int j = 0;
        cJSON_ArrayForEach(w, work)
        {
            SchWork *p = &ly->work[j++];
            if (!cJSON_IsObject(w)) return bad(c, "work", "an array of objects", w);
            if (get_u64(c, w, "req", &p->req) || get_enum(c, w, "op", ops, &p->op, NULL, 0) ||
                get_int(c, w, "tokens", 1, 1 << 30, &p->tokens) || get_int(c, w, "ctx", 0, 1 << 30, &p->ctx))
                return -1;
        }
    }
    return 0;
}

static int cmp_unit(const void *a, const void *b)
{
    const SchUnit *p = a, *q = b;
    return p->id < q->id ? -1 : p->id > q->id;
}

static int check_refs(const Ctx *c0, Schedule *s)
{
    Ctx c = *c0;
    c.line = 0;
    /* units are written as they land; their ids, given at issue, must be 1..n once each */
    if (s->n_units > 0) qsort(s->units, (size_t)s->n_units, sizeof *s->units, cmp_unit);
    for (int i = 0; i < s->n_units; i++)
        if (s->units[i].id != (uint64_t)i + 1)
            return kv_err(c.e, "%s: unit ids: expected each of 1..%d once, %s %llu", c.path, s->n_units,
                          s->units[i].id < (uint64_t)i + 1 ? "got twice" : "missing", (unsigned long long)i + 1);
    for (int i = 0; i < s->n_units; i++) {
        const SchCause *a = &s->units[i].after;
        if ((a->kind == SCH_CAUSE_UNIT && (a->id < 1 || a->id > (uint64_t)s->n_units)) ||
            (a->kind == SCH_CAUSE_ITER && (a->id < 1 || a->id > (uint64_t)s->n_iters)))
            return kv_err(c.e, "%s: unit %llu: field after: names %s %llu, which the schedule does not have", c.path,
                          (unsigned long long)s->units[i].id, a->kind == SCH_CAUSE_UNIT ? "unit" : "iteration",
                          (unsigned long long)a->id);
    }
    for (int i = 0; i < s->n_iters; i++) {
        const SchIter *it = &s->iters[i];
        if ((it->after.kind == SCH_CAUSE_UNIT && it->after.id > (uint64_t)s->n_units) ||
            (it->after.kind == SCH_CAUSE_ITER && it->after.id >= it->id))
            return kv_err(c.e, "%s: iteration %llu: field after: names %s %llu, which the schedule does not have before it", c.path,
                          (unsigned long long)it->id, it->after.kind == SCH_CAUSE_UNIT ? "unit" : "iteration",
                          (unsigned long long)it->after.id);
        for (int k = 0; k < it->nafter; k++)
            if (it->after_units[k] > (uint64_t)s->n_units)
                return kv_err(c.e, "%s: iteration %llu: field after_units: unit %llu is not in the schedule", c.path,
                              (unsigned long long)it->id, (unsigned long long)it->after_units[k]);
        for (int l = 0; l < s->layers; l++)
            for (int k = 0; k < it->layers[l].nwaits; k++)
                if (it->layers[l].waits[k] > (uint64_t)s->n_units)
                    return kv_err(c.e, "%s: iteration %llu: layer %d: field waits: unit %llu is not in the schedule", c.path,
                                  (unsigned long long)it->id, l, (unsigned long long)it->layers[l].waits[k]);
    }
    return 0;
}

int schedule_load(Schedule *s, const char *path, KvErr *e)
{
    memset(s, 0, sizeof *s);
    size_t len;
    char *text = kv_read_file(path, &len, e);
    if (!text) return -1;
    Ctx c = {path, 0, e};
    Caps cp = {0, 0, 0};
    int rc = -1, have_header = 0;
    static const char *const recs[] = {"header", "request", "unit", "iter", "done", "end", NULL};
    for (char *p = text; *p;) {
        char *nl = strchr(p, '\n');
        if (nl) *nl = 0;
        c.line++;
        char *q = p;
        while (*q == ' ' || *q == '\t' || *q == '\r') q++;
        if (*q) {
            cJSON *o = cJSON_Parse(q);
            if (!o || !cJSON_IsObject(o)) {
                cJSON_Delete(o);
                kv_err(e, "%s: line %d: expected one JSON object per line, got: %.60s", path, c.line, q);
                goto out;
            }
            int kind = -1;
            int r = get_enum(&c, o, "rec", recs, &kind, NULL, 0);
            if (r == 0 && kind != 0 && !have_header) r = kv_err(e, "%s: line %d: field rec: expected the header record first", path, c.line);
            if (r == 0 && kind == 0 && have_header) r = bad(&c, "rec", "one header (a second one found)", cJSON_GetObjectItem(o, "rec"));
            if (r == 0) switch (kind) {
                case 0: r = parse_header(&c, o, s), have_header = 1; break;
                case 1: r = parse_request(&c, o, s, &cp); break;
                case 2: r = parse_unit(&c, o, s, &cp); break;
                case 3: r = parse_iter(&c, o, s, &cp); break;
                case 4: r = parse_done(&c, o, s); break;
                default: s->ended = 1; break;
                }
            cJSON_Delete(o);
            if (r != 0) goto out;
        }
        if (!nl) break;
        p = nl + 1;
    }
    if (!have_header) {
        kv_err(e, "%s: no header record (is it a kvsim run --emit-schedule file?)", path);
        goto out;
    }
    if (!s->ended) {
        kv_err(e, "%s: line %d: no end record: the schedule is truncated or its run failed", path, c.line);
        goto out;
    }
    rc = check_refs(&c, s);
out:
    free(text);
    if (rc != 0) schedule_free(s);
    return rc;
}

void schedule_free(Schedule *s)
{
    for (int i = 0; i < s->n_iters; i++) {
        SchIter *it = &s->iters[i];
        if (it->layers)
            for (int l = 0; l < s->layers; l++) {
                free(it->layers[l].work);
                free(it->layers[l].waits);
            }
        free(it->layers);
        free(it->items);
        free(it->lanes);
        free(it->after_units);
    }
    free(s->iters);
    free(s->units);
    free(s->reqs);
    memset(s, 0, sizeof *s);
}

const SchReq *schedule_req(const Schedule *s, uint64_t id)
{
    for (int i = s->n_reqs - 1; i >= 0; i--)
        if (s->reqs[i].id == id) return &s->reqs[i];
    return NULL;
}
