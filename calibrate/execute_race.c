/* execute_race.c — kvcal execute: the token-wise two pointers raced (--race). See execute.h for what a
 * replay does and execute_int.h for the state its files share. */
#include "calibrate/execute_int.h"

/* request k's IO side claims chunks backward while fewer than depth are in flight and tokens above
 * its compute side's are left (restore.c restore_tw_issue), each queued behind every claim before it
 * (caller holds mu) */
static void race_claim(ExRace *rc, int k)
{
    ExRaceReq *a = &rc->rq[k];
    while (a->tw && a->n_flight < a->depth && rc->qn < rc->qcap) {
        int64_t lower = a->comp + a->comp_inflight;
        if (a->io_issued <= lower) return;
        int64_t c = a->io_issued - lower;
        if (c > a->io_chunk) c = a->io_chunk;
        int slot = (rc->qhead + rc->qn) % rc->qcap;
        rc->qreq[slot] = k;
        rc->qlo[slot] = a->io_issued - c;
        rc->qhi[slot] = a->io_issued;
        rc->qn++;
        a->io_issued -= c;
        a->n_flight++;
    }
}

/* request k restored at t once every token is computed or landed and nothing is in flight
 * (restore.c restore_tw_check_done; caller holds mu) */
static void race_check_done(ExRace *rc, int k, int64_t t)
{
    ExRaceReq *a = &rc->rq[k];
    if (!a->tw || a->n_flight || a->comp_inflight || a->comp + a->landed < a->N) return;
    a->tw = 0;
    a->restored = t;
}

static void race_log(ExRace *rc, uint64_t req, int io, int64_t lo, int64_t hi, int64_t t, int64_t t1)
{
    if (rc->n_log < rc->cap_log) rc->log[rc->n_log++] = (ExecChunk){io, lo, hi, t, t1, req};
}

/* the chunk [lo, hi) of request a's token-wise file into the race's buffer (4 KiB aligned reads),
 * fetched from the remote store, or from the DRAM tier's host copy; then copied to the stage's
 * "device" buffer */
static int race_load(Ex *x, ExRace *rc, const ExRaceReq *a, int64_t lo, int64_t hi, int64_t t, KvErr *e)
{
    ExFile *f = &x->files[a->file];
    int64_t off = lo * a->bpt, bytes = (hi - lo) * a->bpt;
    const unsigned char *src;
    if (f->tier == SCH_TIER_SSD) {
        int64_t al = off / EX_ALIGN * EX_ALIGN;
        if (ex_pread_all(f, rc->buf, al, (off + bytes + EX_ALIGN - 1) / EX_ALIGN * EX_ALIGN - al, e) != 0) return -1;
        ex_io_throttle(x, t, bytes, x->io_rate, 0);
        src = rc->buf + (off - al);
    } else if (f->tier == SCH_TIER_REMOTE) { /* over the one NIC */
        if (rstore_fetch(&x->rstore, 0, f->rbase + off, bytes, rc->buf, e) != 0) return -1;
        ex_io_throttle(x, t, bytes, x->net_rate, x->net_lat_ns);
        src = rc->buf;
    } else {
        src = f->host + off;
    }
    size_t n = (size_t)(bytes < x->dev_bytes ? bytes : x->dev_bytes);
    memcpy(x->stage[0].dev_buf, src, n);
    return 0;
}

/* the IO side: the claims in claim order, one at a time (the engine's ssd or nic channel, then h2d) */
static void *race_io_main(void *p)
{
    Ex *x = p;
    ExRace *rc = x->race;
    (void)ex_pin_to(x->io_cpu);
    pthread_mutex_lock(&x->mu);
    for (;;) {
        while (!x->failed && rc->qn == 0 && !rc->done) pthread_cond_wait(&x->cv, &x->mu);
        if (x->failed || rc->qn == 0) break;
        int pick = 0; /* the position in the queue of the claim served next */
        if (rc->oldest) /* the policy's batch-aware order: the smallest request id first, ties in claim order */
            for (int i = 1; i < rc->qn; i++)
                if (rc->rq[rc->qreq[(rc->qhead + i) % rc->qcap]].q->id < rc->rq[rc->qreq[(rc->qhead + pick) % rc->qcap]].q->id) pick = i;
        int at = (rc->qhead + pick) % rc->qcap, k = rc->qreq[at];
        int64_t lo = rc->qlo[at], hi = rc->qhi[at];
        for (int i = pick; i > 0; i--) { /* the claims before it move up one place */
            int to = (rc->qhead + i) % rc->qcap, from = (rc->qhead + i - 1) % rc->qcap;
            rc->qreq[to] = rc->qreq[from];
            rc->qlo[to] = rc->qlo[from];
            rc->qhi[to] = rc->qhi[from];
        }
        rc->qhead = (rc->qhead + 1) % rc->qcap;
        rc->qn--;
        ExRaceReq *a = &rc->rq[k];
        pthread_mutex_unlock(&x->mu);
        KvErr e;
        int64_t t = ex_now(x);
        int bad = race_load(x, rc, a, lo, hi, t, &e);
        int64_t t1 = ex_now(x);
        pthread_mutex_lock(&x->mu);
        if (bad) {
            ex_fail_locked(x, &e);
            break;
        }
        a->landed += hi - lo;
        a->n_flight--;
        race_log(rc, a->q->id, 1, lo, hi, t, t1);
        race_claim(rc, k);
        race_check_done(rc, k, t1);
        pthread_cond_broadcast(&x->cv);
    }
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    return NULL;
}

/* the next iteration's batch by the engine's batching rule (sim/engine/batch.c batch_form) over the
 * admitted requests in admission order (caller holds mu). Returns the items (comp_inflight set for
 * the compute chunks), their request indices in who[]; view and bi: room for n rows and 2 n items */
static int race_form(ExRace *rc, BatchReq *view, int *row_of, BatchItem *bi, SchItem *items, int *who)
{
    int m = 0;
    for (int k = 0; k < rc->n; k++) {
        const ExRaceReq *a = &rc->rq[k];
        if (!a->admitted) continue;
        row_of[m] = k;
        if (a->first >= 0) /* its first token is out: it decodes until its last */
            view[m++] = (BatchReq){.decode = a->out_done < a->q->nout, .low_prio = a->low, .decode_ctx = a->N + a->q->nnew + a->out_done};
        else
            view[m++] = (BatchReq){.low_prio = a->low,
                                   .tw = a->tw,
                                   .tw_busy = a->comp_inflight != 0,
                                   .tw_avail = a->io_issued - a->comp,
                                   .tw_comp = a->comp,
                                   .tw_chunk = a->comp_chunk,
                                   .new_left = a->q->nnew - a->new_done,
                                   .new_ctx = a->N + a->new_done};
    }
    int nb = batch_form(view, m, rc->token_budget, rc->rbudget, bi);
    static const int kind[] = {[IT_DECODE] = SCH_ITEM_DECODE, [IT_RECOMP] = SCH_ITEM_RECOMPUTE, [IT_NEW] = SCH_ITEM_PREFILL};
    int n = 0;
    for (int j = 0; j < nb; j++) {
        int k = row_of[bi[j].req];
        ExRaceReq *a = &rc->rq[k];
        if (bi[j].kind == IT_RECOMP) a->comp_inflight = bi[j].tokens;
        items[n] = (SchItem){a->q->id, kind[bi[j].kind], 0, bi[j].tokens, bi[j].ctx};
        who[n++] = k;
    }
    return n;
}

/* wait on cv until replay time `at` at the latest (caller holds mu) */
static void cv_wait_until(Ex *x, int64_t at)
{
    int64_t abs_ns = x->t0 + at;
    struct timespec ts = {(time_t)(abs_ns / 1000000000), (long)(abs_ns % 1000000000)};
    pthread_cond_timedwait(&x->cv, &x->mu, &ts);
}

/* one race on the calling thread (stage 0 computes, every request's chunks batched into iterations
 * as the engine forms them) with the IO thread beside it, until every request has its first token */
static int race_once(Ex *x, KvErr *e)
{
    ExRace *rc = x->race;
    for (int k = 0; k < rc->n; k++) {
        ExRaceReq *a = &rc->rq[k];
        a->admitted = 0;
        a->tw = a->N > 0;
        a->io_issued = a->N;
        a->comp = a->comp_inflight = a->landed = a->n_flight = a->new_done = a->out_done = 0;
        a->restored = a->first = -1;
    }
    rc->qhead = rc->qn = rc->done = 0;
    rc->n_log = 0;
    x->failed = 0;
    ex_drop_caches(x);
    x->t0 = ex_mono_ns();
    pthread_t th;
    if (pthread_create(&th, NULL, race_io_main, x) != 0) return kv_err(e, "execute: cannot start the IO thread");
    SchItem *items = calloc((size_t)rc->n * 2, sizeof *items);
    int *who = calloc((size_t)rc->n * 2, sizeof *who);
    BatchReq *view = calloc((size_t)rc->n, sizeof *view);
    int *row_of = calloc((size_t)rc->n, sizeof *row_of);
    BatchItem *bi = calloc((size_t)rc->n * 2, sizeof *bi);
    pthread_mutex_lock(&x->mu);
    if (!items || !who || !view || !row_of || !bi) {
        KvErr oe;
        kv_err(&oe, "execute: out of memory");
        ex_fail_locked(x, &oe);
    }
    int firsts = 0;
    while (!x->failed && firsts < rc->n) {
        /* admissions due: the IO side claims first (restore.c), then the iteration forms */
        int64_t now = ex_now(x), next_admit = -1;
        for (int k = 0; k < rc->n; k++) {
            ExRaceReq *a = &rc->rq[k];
            if (a->admitted) continue;
            int64_t at = ex_rel(x, a->q->admit_ns);
            if (at <= now) {
                a->admitted = 1;
                if (a->tw) race_claim(rc, k);
                else a->restored = now;
                pthread_cond_broadcast(&x->cv);
            } else if (next_admit < 0 || at < next_admit) {
                next_admit = at;
            }
        }
        int n = race_form(rc, view, row_of, bi, items, who);
        if (n == 0) { /* nothing runs until a landing or the next admission */
            if (next_admit >= 0) cv_wait_until(x, next_admit);
            else pthread_cond_wait(&x->cv, &x->mu);
            continue;
        }
        pthread_mutex_unlock(&x->mu);
        int64_t t = ex_now(x), we;
        KvErr le;
        int bad = 0;
        for (int l = 0; l < x->s->layers && !bad; l++) bad = ex_layer_run(x, &x->stage[0], items, n, NULL, l, &we, NULL, &le) != 0;
        int64_t t1 = ex_now(x);
        pthread_mutex_lock(&x->mu);
        if (bad) {
            ex_fail_locked(x, &le);
            break;
        }
        for (int i = 0; i < n; i++) {
            int k = who[i];
            ExRaceReq *a = &rc->rq[k];
            if (items[i].kind == SCH_ITEM_RECOMPUTE) {
                a->comp += items[i].tokens;
                a->comp_inflight = 0;
                race_log(rc, a->q->id, 0, items[i].ctx, items[i].ctx + items[i].tokens, t, t1);
                race_claim(rc, k);
                race_check_done(rc, k, t1);
            } else if (items[i].kind == SCH_ITEM_PREFILL) {
                a->new_done += items[i].tokens;
                if (a->new_done == a->q->nnew) {
                    a->first = t1;
                    a->out_done = 1;
                    firsts++;
                }
            } else {
                a->out_done++;
            }
        }
        pthread_cond_broadcast(&x->cv);
    }
    rc->done = 1;
    pthread_cond_broadcast(&x->cv);
    pthread_mutex_unlock(&x->mu);
    pthread_join(th, NULL);
    free(items);
    free(who);
    free(view);
    free(row_of);
    free(bi);
    if (x->failed) {
        *e = x->err;
        return -1;
    }
    return 0;
}

int race_setup(Ex *x, KvErr *e)
{
    const Schedule *s = x->s;
    ExecResult *r = x->r;
    if (x->cuda) return kv_err(e, "execute --race: the cpu backend only");
    if (s->stages != 1) return kv_err(e, "execute --race: a schedule of %d pipeline stages: one expected", s->stages);
    int n_tw = 0;
    for (int i = 0; i < r->n_reqs; i++) {
        const SchReq *q = &s->reqs[r->req_idx[i]];
        if (q->hist == 0) continue;
        if (strcmp(q->restore, "tokenwise"))
            return kv_err(e, "execute --race: request %llu restores '%s': the race is for token-wise two pointers (cake, cacheflow token-wise)",
                          (unsigned long long)q->id, q->restore);
        if (q->io_depth < 1 || q->io_chunk < 1 || q->comp_budget < 1)
            return kv_err(e, "execute --race: request %llu has no io_depth, io_chunk or comp_budget: a schedule from an older kvsim (emit it again)",
                          (unsigned long long)q->id);
        if (q->io_depth > RACE_MAX_DEPTH) return kv_err(e, "execute --race: io_depth %lld: at most %d", (long long)q->io_depth, RACE_MAX_DEPTH);
        n_tw++;
    }
    if (n_tw == 0) return kv_err(e, "execute --race: %d replayed requests, none restoring: nothing to race", r->n_reqs);
    if (r->n_reqs > 1) { /* a batch: the engine's batching rules need the header's budget and each request's priority */
        if (s->token_budget < 1)
            return kv_err(e, "execute --race: a batch of %d requests and no header token_budget: a schedule from an older kvsim (emit it again)",
                          r->n_reqs);
        if (strcmp(s->io_order, "fifo") && strcmp(s->io_order, "oldest"))
            return kv_err(e, "execute --race: a batch of %d requests of %s, whose loads are served in %s order: the race replays "
                          "\"fifo\" and \"oldest\" (one request alone is raced in any)", r->n_reqs, s->policy,
                          s->io_order[0] ? s->io_order : "an unrecorded (a schedule from an older kvsim)");
        for (int i = 0; i < r->n_reqs; i++)
            if (s->reqs[r->req_idx[i]].hist > 0 && !s->reqs[r->req_idx[i]].has_low_prio)
                return kv_err(e, "execute --race: request %llu has no low_prio: a schedule from an older kvsim (emit it again)",
                              (unsigned long long)s->reqs[r->req_idx[i]].id);
    }
    ExRace *rc = calloc(1, sizeof *rc);
    if (!rc) return kv_err(e, "execute: out of memory");
    x->race = rc;
    rc->n = r->n_reqs;
    rc->rq = calloc((size_t)rc->n, sizeof *rc->rq);
    if (!rc->rq) return kv_err(e, "execute: out of memory");
    int64_t max_chunk = 0, cap = 4;
    const SchReq *tw_q = NULL; /* a token-wise request (n_tw >= 1 of them) */
    for (int i = 0; i < rc->n; i++) {
        ExRaceReq *a = &rc->rq[i];
        const SchReq *q = &s->reqs[r->req_idx[i]];
        a->q = q;
        a->file = -1;
        a->N = q->hist;
        if (q->hist == 0) continue;
        for (int j = 0; j < r->n_units && a->file < 0; j++) {
            const SchUnit *u = &s->units[r->unit_idx[j]];
            if (u->req == q->id && u->tokwise && u->tok_hi > u->tok_lo) {
                a->file = x->u_file[j];
                a->bpt = u->bytes / (u->tok_hi - u->tok_lo);
            }
        }
        if (a->file < 0 || a->bpt < 1)
            return kv_err(e, "execute --race: request %llu loads no token-wise unit: nothing tells its file and bytes per token", (unsigned long long)q->id);
        a->io_chunk = q->io_chunk;
        a->depth = q->io_depth;
        a->comp_chunk = q->comp_chunk;
        a->low = q->low_prio;
        ExFile *f = &x->files[a->file];
        if (f->bytes < a->N * a->bpt) f->bytes = a->N * a->bpt; /* the race may load any chunk of the history */
        if (a->io_chunk * a->bpt > max_chunk) max_chunk = a->io_chunk * a->bpt;
        cap += a->N + a->N / a->io_chunk + 4;
        tw_q = q;
    }
    /* the budgets: the restoration's (every token-wise request has the same comp_budget), the
     * header's token budget (one request alone from an older kvsim: enough for its chunk and its new input) */
    rc->rbudget = tw_q->comp_budget;
    rc->token_budget = s->token_budget > 0 ? s->token_budget : kv_max_i64(tw_q->comp_budget, tw_q->nnew);
    rc->qcap = rc->n * RACE_MAX_DEPTH;
    rc->oldest = !strcmp(s->io_order, "oldest");
    rc->qreq = calloc((size_t)rc->qcap, sizeof *rc->qreq);
    rc->qlo = calloc((size_t)rc->qcap, sizeof *rc->qlo);
    rc->qhi = calloc((size_t)rc->qcap, sizeof *rc->qhi);
    size_t buf_bytes = (size_t)((max_chunk + 2 * EX_ALIGN) / EX_ALIGN * EX_ALIGN);
    if (!rc->qreq || !rc->qlo || !rc->qhi || posix_memalign((void **)&rc->buf, EX_ALIGN, buf_bytes) != 0) {
        rc->buf = NULL;
        return kv_err(e, "execute: out of memory");
    }
    memset(rc->buf, 0, buf_bytes);
    if (x->dev_bytes < max_chunk) x->dev_bytes = max_chunk;
    rc->cap_log = (int)cap;
    rc->log = calloc((size_t)rc->cap_log, sizeof *rc->log);
    if (!rc->log) return kv_err(e, "execute: out of memory");
    return 0;
}

void race_free(Ex *x)
{
    if (!x->race) return;
    free(x->race->rq);
    free(x->race->qreq);
    free(x->race->qlo);
    free(x->race->qhi);
    free(x->race->buf);
    free(x->race->log);
    free(x->race);
    x->race = NULL;
}

int race_run(Ex *x, const ExecOptions *o, int reps, KvErr *e)
{
    ExecResult *r = x->r;
    ExRace *rc = x->race;
    int n = rc->n;
    int64_t *tt = calloc((size_t)(reps * n), sizeof *tt), *rs = calloc((size_t)(reps * n), sizeof *rs),
            *fs = calloc((size_t)(reps * n), sizeof *fs), *mt = calloc((size_t)(reps * n), sizeof *mt);
    r->race_meets = calloc((size_t)(reps * n), sizeof *r->race_meets);
    r->reqs = calloc((size_t)n, sizeof *r->reqs);
    int rcode = -1;
    if (!tt || !rs || !fs || !mt || !r->race_meets || !r->reqs) {
        kv_err(e, "execute: out of memory");
        goto out;
    }
    if (race_once(x, e) != 0) goto out; /* warm-up */
    int64_t o0 = r->origin_ns;
    for (int p = 0; p < reps; p++) {
        if (race_once(x, e) != 0) goto out;
        for (int k = 0; k < n; k++) {
            const ExRaceReq *a = &rc->rq[k];
            const SchReq *q = a->q;
            int64_t restored = a->restored >= 0 ? a->restored : ex_rel(x, q->admit_ns);
            tt[k * reps + p] = a->first + o0 - q->release_ns;
            fs[k * reps + p] = restored + o0;
            rs[k * reps + p] = restored + o0 > q->admit_ns ? restored + o0 - q->admit_ns : 0;
            r->race_meets[p * n + k] = mt[k * reps + p] = a->comp;
        }
    }
    for (int k = 0; k < n; k++) {
        ExecReq *m = &r->reqs[k];
        const SchReq *q = rc->rq[k].q;
        m->id = q->id;
        m->release_ns = q->release_ns;
        m->ttft_ns = (int64_t)llround(exec_summary_ns(tt + k * reps, reps, o->stat));
        m->restore_ns = (int64_t)llround(exec_summary_ns(rs + k * reps, reps, o->stat));
        m->restored_ns = (int64_t)llround(exec_summary_ns(fs + k * reps, reps, o->stat));
        m->first_ns = m->release_ns + m->ttft_ns;
        m->meet = exec_summary_ns(mt + k * reps, reps, EXEC_STAT_MEDIAN); /* the meet: the median (a count, not a time) */
    }
    r->race_meet = r->reqs[0].meet;
    for (int k = 0; k < n; k++)
        if (rc->rq[k].N > 0) {
            r->race_meet = r->reqs[k].meet; /* the first restoring request's */
            break;
        }
    r->race_n = n;
    r->chunks = malloc((size_t)(rc->n_log > 0 ? rc->n_log : 1) * sizeof *r->chunks);
    if (!r->chunks) {
        kv_err(e, "execute: out of memory");
        goto out;
    }
    memcpy(r->chunks, rc->log, (size_t)rc->n_log * sizeof *r->chunks);
    r->n_chunks = rc->n_log;
    r->race = 1;
    r->io_rate = x->io_rate;
    r->stage_ok = r->cpu_ok = 1; /* one stage, on the calling thread */
    rcode = 0;
out:
    free(tt);
    free(rs);
    free(fs);
    free(mt);
    return rcode;
}
