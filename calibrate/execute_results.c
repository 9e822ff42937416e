/* execute_results.c — kvcal execute: results: per-request times, one replay of a schedule end to end.
 * See execute.h for what a replay does and execute_int.h for the state its files share. */
#include "calibrate/execute_int.h"

static int cmp_i64(const void *a, const void *b)
{
    int64_t p = *(const int64_t *)a, q = *(const int64_t *)b;
    return p < q ? -1 : p > q;
}

static double median_i64(int64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    return n % 2 ? (double)v[n / 2] : 0.5 * ((double)v[n / 2 - 1] + (double)v[n / 2]);
}

double exec_summary_ns(int64_t *v, int n, int stat)
{
    double m = median_i64(v, n); /* sorts v */
    return stat == EXEC_STAT_MIN ? (double)v[0] : m;
}

/* the measured times of request k of one replay (in the schedule's frame) */
static void req_times(const Ex *x, int k, ExecReq *out)
{
    const Schedule *s = x->s;
    const ExecResult *r = x->r;
    const SchReq *q = &s->reqs[r->req_idx[k]];
    int64_t o = r->origin_ns;
    out->id = q->id;
    out->release_ns = q->release_ns;
    int64_t admit = q->admit_ns, restored = admit, first = -1;
    for (int j = 0; j < r->n_units; j++)
        if (s->units[r->unit_idx[j]].req == q->id && x->u_done[j] + o > restored) restored = x->u_done[j] + o;
    for (int j = 0; j < r->n_iters; j++) {
        const SchIter *it = &s->iters[r->iter_idx[j]];
        int64_t end = x->it_done[j] + o;
        for (int i = 0; i < it->nitems; i++) {
            const SchItem *m = &it->items[i];
            if (m->req != q->id) continue;
            if (m->kind == SCH_ITEM_RECOMPUTE && end > restored) restored = end;
            if (m->kind == SCH_ITEM_PREFILL && m->ctx + m->tokens == q->hist + q->nnew && first < 0) first = end;
        }
        for (int l = 0; l < s->layers; l++) {
            size_t kl = (size_t)j * (size_t)s->layers + (size_t)l;
            for (int w = 0; w < it->layers[l].nwork; w++) {
                const SchWork *wk = &it->layers[l].work[w];
                /* projections / dequantizations: done at the head of the layer; recompute rows: with the layer (walk.c) */
                int64_t le = (wk->op == SCH_WORK_RECOMPUTE ? x->ly_done[kl] : x->ly_end[kl]) + o;
                if (wk->req == q->id && le > restored) restored = le;
            }
        }
        for (int g = 0; g < it->nlanes; g++) /* a stage-parallel restoration: its lanes (walk.c stage_lanes) */
            if (it->lanes[g].req == q->id && x->lane_end[x->lane_off[j] + g] + o > restored) restored = x->lane_end[x->lane_off[j] + g] + o;
    }
    if (first < 0) first = q->first_ns; /* not replayed */
    out->first_ns = first;
    out->ttft_ns = first - q->release_ns;
    int64_t t_rest = restored < first ? restored : first;
    out->restored_ns = t_rest;
    out->restore_ns = t_rest > admit ? t_rest - admit : 0;
}

int exec_run_one(const Schedule *s, const ExecOptions *o, ExecResult *r, KvErr *e)
{
    memset(r, 0, sizeof *r);
    r->deps_ok = 1;
    int cuda = o->backend && !strcmp(o->backend, "cuda");
    if (o->backend && *o->backend && strcmp(o->backend, "cpu") && !cuda)
        return kv_err(e, "execute: backend %s: expected cpu or cuda", o->backend);
    Ex *x = calloc(1, sizeof *x);
    if (!x) return kv_err(e, "execute: out of memory");
    x->s = s;
    x->r = r;
    x->pin = o->pin;
    x->cuda = cuda;
    /* auto: the cpu stages of a several-stage replay spin; one stage (the calling thread, which also
     * waits for the IO threads' reads) and cuda (the host waits for events, the GPU computes) sleep */
    x->spin = o->wait == EXEC_WAIT_SPIN || (o->wait == EXEC_WAIT_AUTO && !cuda && s->stages > 1);
    x->io_rate = o->io_rate > 0 ? o->io_rate : 0;
    x->net_rate = o->net_rate > 0 ? o->net_rate : 0;
    x->net_lat_ns = o->net_latency_ns > 0 ? o->net_latency_ns : 0;
    /* pinning: several stages: stage st on CPU st (each stage's "GPU" its own core), the IO threads on
     * the last CPU when one is left free of stages, else not pinned (the scheduler runs them where a
     * stage waits; on a GPU the copies do not take the compute's cores either). One stage: its compute
     * on the calling thread, not pinned, the IO threads on the last CPU (as before stages were replayed) */
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1) ncpu = 1;
    x->io_cpu = -1;
    for (int st = 0; st < s->stages; st++) {
        x->stage[st] = (ExStage){.x = x, .st = st, .cpu = -1, .dev = &x->dev};
        if (x->pin && s->stages > 1) x->stage[st].cpu = (int)(st % ncpu);
    }
    /* cuda: the IO threads only read and enqueue copies; left to the scheduler (sharing one CPU, a
     * thread spinning in an event wait would delay the other's next copy) */
    if (x->pin && !cuda && ncpu > 1 && (s->stages == 1 || ncpu > s->stages)) x->io_cpu = (int)ncpu - 1;
    r->stages = s->stages;
    pthread_mutex_init(&x->mu, NULL);
    pthread_condattr_t ca_;
    pthread_condattr_init(&ca_);
    pthread_condattr_setclock(&ca_, CLOCK_MONOTONIC); /* cv_wait_until's deadlines are ex_mono_ns times */
    pthread_cond_init(&x->cv, &ca_);
    pthread_condattr_destroy(&ca_);
    int reps = o->reps > 0 ? o->reps : 3, rc = -1;
    int64_t *tt = NULL, *rs = NULL, *fs = NULL, *is = NULL, *id = NULL, *ue = NULL, *lt = NULL, *le = NULL;
    if (cuda) { /* every stage its own ProbeDev (its stream, its cuBLAS handle) and copy stream, on one device */
        if (probe_cuda_open(&x->dev, EX_CUDA_DEVICE, KV_DT_FP16, e) != 0) {
            kv_err_prefix(e, "execute: backend cuda: ");
            goto out;
        }
        x->dev_open = 1;
        for (int st = 0; st < s->stages; st++) {
            ExStage *g = &x->stage[st];
            if (st > 0) {
                if (probe_cuda_open(&g->own, EX_CUDA_DEVICE, KV_DT_FP16, e) != 0) {
                    kv_err_prefix(e, "execute: backend cuda: stage %d: ", st);
                    goto out;
                }
                g->own_open = 1;
                g->dev = &g->own;
            }
            g->cs = probe_cuda_stream(g->dev);
            if (!g->cs || !(g->copy = probe_cuda_stream_open(g->dev, e))) {
                if (!g->cs) kv_err(e, "execute: backend cuda: stage %d: no compute stream (internal)", st);
                goto out;
            }
        }
    } else {
        if (probe_cpu_open(&x->dev, e) != 0) goto out;
        x->dev_open = 1;
    }
    if (ex_prepare(x, o, e) != 0) goto out;
    if (x->race) { /* the two pointers at run time (execute.h "Race"): no schedule iterations or units */
        if (race_run(x, o, reps, e) != 0) goto out;
        goto summarised;
    }
    int nr = r->n_reqs ? r->n_reqs : 1, ni = r->n_iters ? r->n_iters : 1, nu = r->n_units ? r->n_units : 1;
    tt = calloc((size_t)(nr * reps), sizeof *tt);
    rs = calloc((size_t)(nr * reps), sizeof *rs);
    fs = calloc((size_t)(nr * reps), sizeof *fs);
    is = calloc((size_t)(ni * reps), sizeof *is);
    id = calloc((size_t)(ni * reps), sizeof *id);
    ue = calloc((size_t)(nu * reps), sizeof *ue);
    int nl = r->n_lanes ? r->n_lanes : 1;
    lt = calloc((size_t)(nl * reps), sizeof *lt);
    le = calloc((size_t)(nl * reps), sizeof *le);
    r->reqs = calloc((size_t)nr, sizeof *r->reqs);
    r->iter_ns = calloc((size_t)ni, sizeof *r->iter_ns);
    r->iter_start_ns = calloc((size_t)ni, sizeof *r->iter_start_ns);
    r->unit_end_ns = calloc((size_t)nu, sizeof *r->unit_end_ns);
    if (!tt || !rs || !fs || !is || !id || !ue || !lt || !le || !r->reqs || !r->iter_ns || !r->iter_start_ns || !r->unit_end_ns) {
        kv_err(e, "execute: out of memory");
        goto out;
    }
    /* one warm-up replay (page faults, OpenBLAS threads), then the timed ones */
    if (ex_replay(x, e) != 0) goto out;
    r->deps_ok = 1;
    r->deps_why[0] = '\0';
    r->stage_ok = 1;
    r->cpu_ok = 1;
    for (int p = 0; p < reps; p++) {
        if (ex_replay(x, e) != 0) goto out;
        /* each layer on its stage's thread (and, pinned, on that stage's CPU) */
        for (int k = 0; k < r->n_iters; k++)
            for (int l = 0; l < s->layers; l++) {
                size_t kl = (size_t)k * (size_t)s->layers + (size_t)l;
                int st = schedule_stage_of(s, l);
                if (r->layer_stage[kl] != st) r->stage_ok = 0;
                if (x->stage[st].cpu >= 0 && r->layer_cpu[kl] != x->stage[st].cpu) r->cpu_ok = 0;
            }
        for (int j = 0; j < r->n_lanes; j++) {
            lt[j * reps + p] = x->lane_end[j] - x->lane_start[j];
            le[j * reps + p] = x->lane_end[j] + r->origin_ns;
        }
        for (int k = 0; k < r->n_reqs; k++) {
            ExecReq q;
            req_times(x, k, &q);
            r->reqs[k] = q;
            tt[k * reps + p] = q.ttft_ns;
            rs[k * reps + p] = q.restore_ns;
            fs[k * reps + p] = q.restored_ns;
        }
        for (int k = 0; k < r->n_iters; k++) {
            is[k * reps + p] = x->it_start[k] + r->origin_ns;
            id[k * reps + p] = x->it_done[k] - x->it_start[k];
        }
        for (int k = 0; k < r->n_units; k++) ue[k * reps + p] = x->u_done[k] + r->origin_ns;
    }
    for (int k = 0; k < r->n_reqs; k++) {
        r->reqs[k].ttft_ns = (int64_t)llround(exec_summary_ns(tt + k * reps, reps, o->stat));
        r->reqs[k].restore_ns = (int64_t)llround(exec_summary_ns(rs + k * reps, reps, o->stat));
        r->reqs[k].restored_ns = (int64_t)llround(exec_summary_ns(fs + k * reps, reps, o->stat));
        r->reqs[k].first_ns = r->reqs[k].release_ns + r->reqs[k].ttft_ns;
    }
    for (int k = 0; k < r->n_iters; k++) {
        r->iter_start_ns[k] = exec_summary_ns(is + k * reps, reps, o->stat);
        r->iter_ns[k] = exec_summary_ns(id + k * reps, reps, o->stat);
    }
    for (int k = 0; k < r->n_units; k++) r->unit_end_ns[k] = exec_summary_ns(ue + k * reps, reps, o->stat);
    for (int j = 0; j < r->n_lanes; j++) {
        r->lane_ns[j] = exec_summary_ns(lt + j * reps, reps, o->stat);
        r->lane_end_ns[j] = exec_summary_ns(le + j * reps, reps, o->stat);
    }
summarised:
    r->stat = o->stat;
    r->reps = reps;
    char stages[320] = "";
    if (x->race) kv_catf(stages, sizeof stages, "; race: the two pointers by kvsim's rules at run time");
    if (x->io_rate > 0) kv_catf(stages, sizeof stages, "; ssd hops at most %.4g MB/s (emulated)", x->io_rate / 1e6);
    if (x->rstore.n > 0) {
        kv_catf(stages, sizeof stages, "; remote tier: a server process per NIC (%d) on the loopback interface (TCP)", x->rstore.n);
        if (x->net_rate > 0 || x->net_lat_ns > 0)
            kv_catf(stages, sizeof stages, ", nic hops at least %.4g us + bytes / %.4g MB/s (emulated)", (double)x->net_lat_ns / 1e3,
                     x->net_rate / 1e6);
    }
    if (x->race) {
    } else if (s->stages > 1 && x->stage[0].cpu >= 0)
        kv_catf(stages, sizeof stages, "; %d stage threads, stage st on CPU st%s%s", s->stages,
                 ncpu < s->stages ? " mod the CPUs (stages share CPUs)" : "", r->cpu_ok ? "" : " (NOT every layer ended there)");
    else if (s->stages > 1)
        kv_catf(stages, sizeof stages, "; %d stage threads, not pinned", s->stages);
    if (x->spin) kv_catf(stages, sizeof stages, "; stage threads wait spinning");
    if (cuda)
        snprintf(r->note, sizeof r->note,
                 "cuda, %s, fp16: per stage a compute and an h2d stream, the GPU waits on events; h2d = cudaMemcpyAsync from "
                 "pinned memory; ssd: %s pread, 1 MiB per call; IO threads %s%s",
                 x->dev.device, x->o_direct ? "O_DIRECT" : "buffered (O_DIRECT refused)",
                 x->io_cpu >= 0 ? "pinned to the last CPU" : "not pinned", stages);
    else
        snprintf(r->note, sizeof r->note, "%s; IO: %s pread (1 MiB per call), h2d = memcpy; IO threads %s%s", x->dev.info,
                 x->o_direct ? "O_DIRECT" : "buffered (O_DIRECT refused; page cache dropped before each replay)",
                 x->io_cpu >= 0 ? "pinned to the last CPU" : x->pin ? "not pinned (no CPU free of a stage)" : "not pinned", stages);
    rc = 0;
out:
    if (cuda) ex_cuda_teardown(x); /* streams drained before the pinned memory and the files go */
    free(tt);
    free(rs);
    free(fs);
    free(is);
    free(id);
    free(ue);
    free(lt);
    free(le);
    for (int i = 0; i < x->n_files; i++) {
        if (x->files[i].fd >= 0) close(x->files[i].fd);
        if (x->files[i].path[0]) unlink(x->files[i].path);
        if (x->files[i].pin.p) probe_cuda_pinned_free(&x->files[i].pin);
        else free(x->files[i].host);
    }
    free(x->files);
    rstore_close(&x->rstore); /* the servers reaped */
    if (x->staging && !cuda)
        for (int k = 0; k < r->n_units; k++) free(x->staging[k]);
    probe_cuda_pinned_free(&x->stage_pin); /* cuda: the staging buffers (a zeroed one on cpu) */
    free(x->staging);
    free(x->u_file);
    free(x->u_start);
    free(x->u_len);
    free(x->hop_end);
    free(x->hop_start);
    free(x->u_done);
    free(x->it_done);
    free(x->it_start);
    free(x->ly_end);
    free(x->ly_done);
    free(x->lane_off);
    free(x->lane_start);
    free(x->lane_end);
    free(x->unit_of_id);
    free(x->iter_of_id);
    for (int q = 0; q < EX_NQ; q++) free(x->q[q]);
    for (int st = 0; st < SCH_MAX_STAGES; st++) {
        if (!cuda) free(x->stage[st].dev_buf); /* cuda: device memory, released with its device */
        free(x->stage[st].ctx_off);
    }
    free(x->ws); /* the buffers themselves go with the device */
    race_free(x);
    if (x->dev_open) probe_close(&x->dev);
    pthread_mutex_destroy(&x->mu);
    pthread_cond_destroy(&x->cv);
    free(x);
    if (rc != 0) exec_result_free(r);
    return rc;
}
