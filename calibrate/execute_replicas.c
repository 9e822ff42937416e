/* execute_replicas.c — kvcal execute: several replicas: one replay per replica, merged; freeing and
 * writing a result. See execute.h for what a replay does and execute_int.h for the state its files
 * share. */
#include "calibrate/execute_int.h"

/* replica k's part of s as a schedule of its own (one replica): its requests, the units that load
 * for them and its iterations, renumbered 1..n as the reader numbers a file, every reference to a
 * unit or an iteration mapped; *umap / *imap: the part's unit / iteration k → its index in s. The
 * part's arrays are its own, the items, lanes and works they point to are s's. -1 when something
 * of replica k waits for another replica's unit or iteration (replicas share nothing here). */
typedef struct ExPart {
    Schedule s;
    int *umap, *imap, *rmap;
    uint64_t *ids; /* the remapped waits and after_units, one block */
} ExPart;

static void part_free(ExPart *p)
{
    free(p->s.reqs);
    free(p->s.units);
    if (p->s.iters)
        for (int i = 0; i < p->s.n_iters; i++) free(p->s.iters[i].layers);
    free(p->s.iters);
    free(p->umap);
    free(p->imap);
    free(p->rmap);
    free(p->ids);
    memset(p, 0, sizeof *p);
}

static int part_ref(const int *new_of, uint64_t id, int n, uint64_t *out)
{
    if (id < 1 || id > (uint64_t)n || new_of[id - 1] < 0) return -1;
    *out = (uint64_t)new_of[id - 1] + 1;
    return 0;
}

static int part_cause(const int *unit_new, const int *iter_new, const Schedule *s, SchCause *c)
{
    if (c->kind == SCH_CAUSE_UNIT) return part_ref(unit_new, c->id, s->n_units, &c->id);
    if (c->kind == SCH_CAUSE_ITER) return part_ref(iter_new, c->id, s->n_iters, &c->id);
    return 0;
}

static int part_make(const Schedule *s, int k, ExPart *p, KvErr *e)
{
    memset(p, 0, sizeof *p);
    p->s = *s;
    p->s.replicas = 1;
    p->s.reqs = NULL;
    p->s.units = NULL;
    p->s.iters = NULL;
    p->s.n_reqs = p->s.n_units = p->s.n_iters = 0;
    int *unit_new = calloc((size_t)s->n_units + 1, sizeof *unit_new), *iter_new = calloc((size_t)s->n_iters + 1, sizeof *iter_new);
    p->s.reqs = calloc((size_t)s->n_reqs + 1, sizeof *p->s.reqs);
    p->s.units = calloc((size_t)s->n_units + 1, sizeof *p->s.units);
    p->s.iters = calloc((size_t)s->n_iters + 1, sizeof *p->s.iters);
    p->umap = calloc((size_t)s->n_units + 1, sizeof *p->umap);
    p->imap = calloc((size_t)s->n_iters + 1, sizeof *p->imap);
    p->rmap = calloc((size_t)s->n_reqs + 1, sizeof *p->rmap);
    size_t nids = 0;
    for (int i = 0; i < s->n_iters; i++) {
        nids += (size_t)s->iters[i].nafter;
        for (int l = 0; l < s->layers; l++) nids += (size_t)s->iters[i].layers[l].nwaits;
    }
    p->ids = calloc(nids + 1, sizeof *p->ids);
    int rc = -1;
    if (!unit_new || !iter_new || !p->s.reqs || !p->s.units || !p->s.iters || !p->umap || !p->imap || !p->rmap || !p->ids) {
        kv_err(e, "execute: out of memory");
        goto out;
    }
    for (int i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].replica == k) {
            p->rmap[p->s.n_reqs] = i;
            p->s.reqs[p->s.n_reqs++] = s->reqs[i];
        }
    for (int i = 0; i < s->n_units; i++) {
        const SchReq *q = schedule_req(s, s->units[i].req);
        unit_new[i] = -1;
        if (!q || q->replica != k) continue;
        unit_new[i] = p->s.n_units;
        p->umap[p->s.n_units++] = i;
    }
    for (int i = 0; i < s->n_iters; i++) {
        iter_new[i] = -1;
        if (s->iters[i].replica != k) continue;
        iter_new[i] = p->s.n_iters;
        p->imap[p->s.n_iters++] = i;
    }
    for (int j = 0; j < p->s.n_units; j++) {
        SchUnit *u = &p->s.units[j];
        *u = s->units[p->umap[j]];
        u->id = (uint64_t)j + 1;
        if (part_cause(unit_new, iter_new, s, &u->after) != 0) {
            kv_err(e, "execute: unit %llu (replica %d) waits for a unit or iteration of another replica: replicas share nothing "
                   "in a replay", (unsigned long long)s->units[p->umap[j]].id, k);
            goto out;
        }
    }
    uint64_t *ids = p->ids;
    for (int j = 0; j < p->s.n_iters; j++) {
        const SchIter *src = &s->iters[p->imap[j]];
        SchIter *it = &p->s.iters[j];
        *it = *src;
        it->id = (uint64_t)j + 1;
        it->layers = NULL;
        int bad = part_cause(unit_new, iter_new, s, &it->after) != 0;
        it->after_units = ids;
        for (int a = 0; a < src->nafter && !bad; a++) bad = part_ref(unit_new, src->after_units[a], s->n_units, ids++) != 0;
        it->layers = calloc((size_t)s->layers, sizeof *it->layers);
        if (!it->layers) {
            kv_err(e, "execute: out of memory");
            goto out;
        }
        for (int l = 0; l < s->layers && !bad; l++) {
            it->layers[l] = src->layers[l];
            it->layers[l].waits = ids;
            for (int w = 0; w < src->layers[l].nwaits && !bad; w++)
                bad = part_ref(unit_new, src->layers[l].waits[w], s->n_units, ids++) != 0;
        }
        if (bad) {
            kv_err(e, "execute: iteration %llu (replica %d) waits for a unit or iteration of another replica: replicas share "
                   "nothing in a replay", (unsigned long long)src->id, k);
            goto out;
        }
    }
    rc = 0;
out:
    free(unit_new);
    free(iter_new);
    if (rc != 0) part_free(p);
    return rc;
}

/* append replica part p's result to r (indices mapped back to s's arrays) */
static int part_merge(ExecResult *r, const ExPart *p, const ExecResult *q, int layers, KvErr *e)
{
#define GROW_CAT(arr, n_old, n_add, src)                                                                                   \
    do {                                                                                                               \
        void *nb_ = realloc((arr), ((size_t)(n_old) + (size_t)(n_add) + 1) * sizeof *(arr));                          \
        if (!nb_) return kv_err(e, "execute: out of memory");                                                          \
        (arr) = nb_;                                                                                                   \
        if ((n_add) > 0) memcpy((arr) + (n_old), (src), (size_t)(n_add) * sizeof *(arr));                              \
    } while (0)
    int nr = r->n_reqs, nu = r->n_units, ni = r->n_iters, nl = r->n_lanes;
    GROW_CAT(r->reqs, nr, q->n_reqs, q->reqs);
    GROW_CAT(r->req_idx, nr, q->n_reqs, q->req_idx);
    GROW_CAT(r->unit_idx, nu, q->n_units, q->unit_idx);
    GROW_CAT(r->unit_end_ns, nu, q->n_units, q->unit_end_ns);
    GROW_CAT(r->iter_idx, ni, q->n_iters, q->iter_idx);
    GROW_CAT(r->iter_ns, ni, q->n_iters, q->iter_ns);
    GROW_CAT(r->iter_start_ns, ni, q->n_iters, q->iter_start_ns);
    GROW_CAT(r->layer_stage, (int64_t)ni * layers, (int64_t)q->n_iters * layers, q->layer_stage);
    GROW_CAT(r->layer_cpu, (int64_t)ni * layers, (int64_t)q->n_iters * layers, q->layer_cpu);
    GROW_CAT(r->lane_ns, nl, q->n_lanes, q->lane_ns);
    GROW_CAT(r->lane_end_ns, nl, q->n_lanes, q->lane_end_ns);
#undef GROW_CAT
    for (int k = 0; k < q->n_reqs; k++) r->req_idx[nr + k] = p->rmap[q->req_idx[k]];
    for (int k = 0; k < q->n_units; k++) r->unit_idx[nu + k] = p->umap[q->unit_idx[k]];
    for (int k = 0; k < q->n_iters; k++) r->iter_idx[ni + k] = p->imap[q->iter_idx[k]];
    r->n_reqs += q->n_reqs;
    r->n_units += q->n_units;
    r->n_iters += q->n_iters;
    r->n_lanes += q->n_lanes;
    return 0;
}

/* Several replicas: each is a machine of its own (its GPUs, its link, its SSD; kvsim's router
 * decided which requests it serves), so each replica's part is replayed on this machine on its own,
 * one after another, and the results put side by side in s's frame (a part's times are its own
 * origin plus wall time, and its origin is its own first restoring release: the replicas' clocks
 * are the schedule's). */
static int exec_run_replicas(const Schedule *s, const ExecOptions *o, ExecResult *r, KvErr *e)
{
    memset(r, 0, sizeof *r);
    r->deps_ok = r->stage_ok = r->cpu_ok = 1;
    r->origin_ns = -1;
    int replayed = 0;
    for (int k = 0; k < s->replicas; k++) {
        ExPart p;
        if (part_make(s, k, &p, e) != 0) goto fail;
        if (p.s.n_reqs == 0) { /* the router sent it nothing */
            part_free(&p);
            continue;
        }
        ExecResult q;
        if (exec_run_one(&p.s, o, &q, e) != 0) {
            kv_err_prefix(e, "replica %d: ", k);
            part_free(&p);
            goto fail;
        }
        int rc = part_merge(r, &p, &q, s->layers, e);
        if (rc == 0) {
            if (r->origin_ns < 0 || q.origin_ns < r->origin_ns) r->origin_ns = q.origin_ns;
            r->deps_ok &= q.deps_ok;
            r->stage_ok &= q.stage_ok;
            r->cpu_ok &= q.cpu_ok;
            r->stages = q.stages;
            r->reps = q.reps;
            r->stat = q.stat;
            if (!r->deps_why[0] && q.deps_why[0]) snprintf(r->deps_why, sizeof r->deps_why, "replica %d: %s", k, q.deps_why);
            if (!replayed) snprintf(r->note, sizeof r->note, "%s", q.note);
            replayed++;
        }
        exec_result_free(&q);
        part_free(&p);
        if (rc != 0) goto fail;
    }
    if (r->origin_ns < 0) r->origin_ns = 0;
    {
        char tail[96];
        snprintf(tail, sizeof tail, "; %d of %d replicas replayed one after another", replayed, s->replicas);
        size_t n = strlen(r->note);
        if (n + strlen(tail) < sizeof r->note) memcpy(r->note + n, tail, strlen(tail) + 1);
    }
    return 0;
fail:
    exec_result_free(r);
    return -1;
}

int exec_run(const Schedule *s, const ExecOptions *o, ExecResult *r, KvErr *e)
{
    if (s->replicas > 1 && o->race) return kv_err(e, "execute --race: a schedule of %d replicas: one expected", s->replicas);
    if (s->replicas > 1) return exec_run_replicas(s, o, r, e);
    return exec_run_one(s, o, r, e);
}

void exec_result_free(ExecResult *r)
{
    free(r->unit_idx);
    free(r->iter_idx);
    free(r->req_idx);
    free(r->reqs);
    free(r->iter_ns);
    free(r->iter_start_ns);
    free(r->unit_end_ns);
    free(r->layer_stage);
    free(r->layer_cpu);
    free(r->lane_ns);
    free(r->lane_end_ns);
    free(r->race_meets);
    free(r->chunks);
    memset(r, 0, sizeof *r);
}

static void pair(FILE *f, const char *key, double measured, double predicted, int comma)
{
    double err = predicted > 0 ? (predicted - measured) / measured : 0;
    fprintf(f, "\"%s\":{\"measured\":%.0f,\"predicted\":%.0f,\"error\":%.6f}%s", key, measured, predicted,
            measured > 0 ? err : 0.0, comma ? "," : "");
}

int exec_write_json(FILE *f, const Schedule *s, const ExecResult *r, const char *schedule_path)
{
    fprintf(f, "{\"schedule\":\"%s\",\"model\":\"%s\",\"policy\":\"%s\",\"origin_ns\":%" PRId64 ",\"reps\":%d,\"stat\":\"%s\",\"deps_ok\":%d,",
            schedule_path, s->model, s->policy, r->origin_ns, r->reps, r->stat == EXEC_STAT_MIN ? "min" : "median", r->deps_ok);
    fprintf(f, "\"stages\":%d,\"stage_ok\":%d,\"lanes\":%d,", r->stages, r->stage_ok, r->n_lanes);
    fprintf(f, "\"units\":%d,\"iterations\":%d,\"note\":\"%s\",\n\"requests\":[", r->n_units, r->n_iters, r->note);
    for (int k = 0; k < r->n_reqs; k++) {
        const SchReq *q = &s->reqs[r->req_idx[k]];
        const ExecReq *m = &r->reqs[k];
        fprintf(f, "%s\n{\"req\":%" PRIu64 ",\"turn\":%d,\"hist\":%" PRId64 ",\"new\":%" PRId64 ",\"restore\":\"%s\",", k ? "," : "",
                q->id, q->turn, q->hist, q->nnew, q->restore);
        pair(f, "ttft_ns", (double)m->ttft_ns, (double)q->ttft_ns, 1);
        pair(f, "restore_ns", (double)m->restore_ns, (double)q->restore_ns, 1);
        if (r->race) { /* its meet (the median over the replays) and each replay's */
            fprintf(f, "\"meet_measured\":%.0f,\"meets_measured\":[", m->meet);
            for (int p = 0; p < r->reps; p++) fprintf(f, "%s%" PRId64, p ? "," : "", r->race_meets[p * r->race_n + k]);
            fputs("],", f);
        }
        fprintf(f, "\"meet_tokens\":%" PRId64 "}", q->meet_tokens);
    }
    if (r->race) { /* the two pointers at run time: each replay's meet, the last replay's chunks */
        fprintf(f, "],\n\"race\":{\"io_rate\":%.0f,\"meets\":[", r->io_rate);
        int k0 = 0; /* the first restoring request's, as before batches were raced */
        while (k0 + 1 < r->n_reqs && s->reqs[r->req_idx[k0]].hist == 0) k0++;
        for (int p = 0; p < r->reps; p++) fprintf(f, "%s%" PRId64, p ? "," : "", r->race_meets[p * r->race_n + k0]);
        fputs("],\"chunks\":[", f);
        for (int k = 0; k < r->n_chunks; k++) {
            const ExecChunk *c = &r->chunks[k];
            fprintf(f, "%s\n{\"req\":%" PRIu64 ",\"side\":\"%s\",\"lo\":%" PRId64 ",\"hi\":%" PRId64 ",\"start_ns\":%" PRId64
                       ",\"end_ns\":%" PRId64 "}",
                    k ? "," : "", c->req, c->io ? "io" : "compute", c->lo, c->hi, c->start_ns, c->end_ns);
        }
        fputs("]},\n\"iterations\":[],\n\"unit_landing\":[]}\n", f);
        return ferror(f) ? -1 : 0;
    }
    fputs("],\n\"iterations\":[", f);
    int lane = 0;
    for (int k = 0; k < r->n_iters; k++) {
        const SchIter *it = &s->iters[r->iter_idx[k]];
        int64_t tok = 0;
        for (int i = 0; i < it->nitems; i++) tok += it->items[i].tokens;
        fprintf(f, "%s\n{\"iter\":%" PRIu64 ",\"items\":%d,\"tokens\":%" PRId64 ",", k ? "," : "", it->id, it->nitems, tok);
        pair(f, "duration_ns", r->iter_ns[k], (double)(it->end_ns - it->start_ns), 1);
        pair(f, "start_ns", r->iter_start_ns[k] - (double)r->origin_ns, (double)(it->start_ns - r->origin_ns), 0);
        if (it->nlanes) { /* the stage-parallel lanes as replayed (the schedule predicts no per-lane times) */
            fputs(",\"lanes\":[", f);
            for (int j = 0; j < it->nlanes; j++, lane++)
                fprintf(f, "%s{\"stage\":%d,\"layer\":%d,\"req\":%" PRIu64 ",\"tokens\":%" PRId64 ",\"measured_ns\":%.0f,\"end_ns\":%.0f}",
                        j ? "," : "", it->lanes[j].stage, it->lanes[j].layer, it->lanes[j].req, it->lanes[j].tokens, r->lane_ns[lane],
                        r->lane_end_ns[lane] - (double)r->origin_ns);
            fputc(']', f);
        }
        fputc('}', f);
    }
    fputs("],\n\"unit_landing\":[", f);
    for (int k = 0; k < r->n_units; k++) {
        const SchUnit *u = &s->units[r->unit_idx[k]];
        fprintf(f, "%s\n{\"unit\":%" PRIu64 ",\"layer\":%d,\"bytes\":%" PRId64 ",", k ? "," : "", u->id, u->layer, u->bytes);
        pair(f, "end_ns", r->unit_end_ns[k] - (double)r->origin_ns, (double)(u->hop[u->nhops - 1].end_ns - r->origin_ns), 0);
        fputc('}', f);
    }
    fputs("]}\n", f);
    return ferror(f) ? -1 : 0;
}
