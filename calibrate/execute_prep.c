/* execute_prep.c — kvcal execute: preparing a replay: the state files, the kernels, the buffers and
 * the weights. See execute.h for what a replay does and execute_int.h for the state its files share. */
#include "calibrate/execute_int.h"

static int file_of(Ex *x, const SchUnit *u, KvErr *e)
{
    for (int i = 0; i < x->n_files; i++)
        if (!strcmp(x->files[i].name, u->file) && x->files[i].tier == u->tier) return i;
    ExFile *nf = realloc(x->files, (size_t)(x->n_files + 1) * sizeof *nf);
    if (!nf) return kv_err(e, "execute: out of memory");
    x->files = nf;
    ExFile *f = &x->files[x->n_files];
    memset(f, 0, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", u->file);
    f->tier = u->tier;
    f->fd = -1;
    return x->n_files++;
}

static int write_file(ExFile *f, const char *dir, KvErr *e)
{
    snprintf(f->path, sizeof f->path, "%s/kvcal-exec.%d.%s", dir, (int)getpid(), f->name);
    int fd = open(f->path, O_CREAT | O_TRUNC | O_WRONLY, 0600);
    if (fd < 0) return kv_err(e, "%s: cannot create (%s)", f->path, strerror(errno));
    unsigned char *buf = malloc(EX_IO_BYTES);
    if (!buf) {
        close(fd);
        return kv_err(e, "execute: out of memory");
    }
    uint64_t st = 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < EX_IO_BYTES; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        buf[i] = (unsigned char)st;
    }
    int64_t left = f->bytes;
    while (left > 0) {
        size_t n = (size_t)(left < EX_IO_BYTES ? left : EX_IO_BYTES);
        if (write(fd, buf, n) != (ssize_t)n) {
            free(buf);
            close(fd);
            return kv_err(e, "%s: write failed (%s)", f->path, strerror(errno));
        }
        left -= (int64_t)n;
    }
    free(buf);
    if (fdatasync(fd) != 0 || close(fd) != 0) return kv_err(e, "%s: sync failed (%s)", f->path, strerror(errno));
    return 0;
}

static int open_for_read(ExFile *f, int *o_direct, KvErr *e)
{
    f->fd = open(f->path, O_RDONLY | O_DIRECT);
    if (f->fd >= 0) return 0;
    *o_direct = 0;
    f->fd = open(f->path, O_RDONLY);
    if (f->fd < 0) return kv_err(e, "%s: cannot open (%s)", f->path, strerror(errno));
    return 0;
}

static int cmp_hop(const void *a, const void *b)
{
    const ExHopRef *p = a, *q = b;
    if (p->pred_start != q->pred_start) return p->pred_start < q->pred_start ? -1 : 1;
    return p->u - q->u;
}

/* cuda: the events (created once, recorded again in every replay) and the issue flags */
static int cuda_prepare(Ex *x, KvErr *e)
{
    const ExecResult *r = x->r;
    size_t nu = (size_t)(r->n_units > 0 ? r->n_units : 1), nkl = (size_t)(r->n_iters > 0 ? r->n_iters : 1) * (size_t)x->s->layers,
           nl = (size_t)(r->n_lanes > 0 ? r->n_lanes : 1);
    x->u_ev = calloc(nu, sizeof *x->u_ev);
    x->ly_ev = calloc(3 * nkl, sizeof *x->ly_ev);
    x->lane_ev = calloc(2 * nl, sizeof *x->lane_ev);
    x->u_issued = calloc(nu, sizeof *x->u_issued);
    x->ly_issued = calloc(nkl, sizeof *x->ly_issued);
    x->ly_start = calloc(nkl, sizeof *x->ly_start);
    if (!x->u_ev || !x->ly_ev || !x->lane_ev || !x->u_issued || !x->ly_issued || !x->ly_start) return kv_err(e, "execute: out of memory");
    if (!(x->ev0 = probe_cuda_event_new(&x->dev, e))) return kv_err_prefix(e, "execute: events: ");
    for (int k = 0; k < r->n_units; k++)
        if (!(x->u_ev[k] = probe_cuda_event_new(&x->dev, e))) return kv_err_prefix(e, "execute: events: ");
    for (size_t k = 0; k < 3 * (size_t)r->n_iters * (size_t)x->s->layers; k++)
        if (!(x->ly_ev[k] = probe_cuda_event_new(&x->dev, e))) return kv_err_prefix(e, "execute: events: ");
    for (int j = 0; j < 2 * r->n_lanes; j++)
        if (!(x->lane_ev[j] = probe_cuda_event_new(&x->dev, e))) return kv_err_prefix(e, "execute: events: ");
    return 0;
}

/* cuda, at the end (also after a failure half-way): every stream drained and closed before its
 * events and the pinned memory its copies read go; the stages' own devices closed (stage 0's,
 * x->dev, holds the shared weights: closed last, by exec_run). CUDA errors here are not reported
 * (the result, or the first error, is already decided). */
void ex_cuda_teardown(Ex *x)
{
    KvErr e2;
    for (int st = 0; st < SCH_MAX_STAGES; st++) {
        ExStage *g = &x->stage[st];
        probe_cuda_stream_close(g->copy); /* waits for its copies */
        g->copy = NULL;
        if (g->cs) (void)probe_cuda_sync(g->cs, &e2);
    }
    probe_cuda_event_free(x->ev0);
    x->ev0 = NULL;
    if (x->u_ev)
        for (int k = 0; k < x->r->n_units; k++) probe_cuda_event_free(x->u_ev[k]);
    if (x->ly_ev)
        for (size_t k = 0; k < 3 * (size_t)x->r->n_iters * (size_t)x->s->layers; k++) probe_cuda_event_free(x->ly_ev[k]);
    if (x->lane_ev)
        for (int j = 0; j < 2 * x->r->n_lanes; j++) probe_cuda_event_free(x->lane_ev[j]);
    free(x->u_ev);
    free(x->ly_ev);
    free(x->lane_ev);
    free(x->u_issued);
    free(x->ly_issued);
    free(x->ly_start);
    x->u_ev = x->ly_ev = x->lane_ev = NULL;
    for (int st = 0; st < SCH_MAX_STAGES; st++) {
        ExStage *g = &x->stage[st];
        if (g->own_open) probe_close(&g->own); /* its buffers, its stream, its cuBLAS handle */
        g->own_open = 0;
        g->cs = NULL;
    }
}


int ex_prepare(Ex *x, const ExecOptions *o, KvErr *e)
{
    const Schedule *s = x->s;
    ExecResult *r = x->r;
    /* the origin: the first release of a request with history */
    r->origin_ns = -1;
    for (int i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].hist > 0 && (r->origin_ns < 0 || s->reqs[i].release_ns < r->origin_ns)) r->origin_ns = s->reqs[i].release_ns;
    if (r->origin_ns < 0) r->origin_ns = 0;
    r->unit_idx = calloc((size_t)s->n_units + 1, sizeof(int));
    r->iter_idx = calloc((size_t)s->n_iters + 1, sizeof(int));
    r->req_idx = calloc((size_t)s->n_reqs + 1, sizeof(int));
    x->unit_of_id = calloc((size_t)s->n_units + 1, sizeof(int));
    x->iter_of_id = calloc((size_t)s->n_iters + 1, sizeof(int));
    if (!r->unit_idx || !r->iter_idx || !r->req_idx || !x->unit_of_id || !x->iter_of_id) return kv_err(e, "execute: out of memory");
    for (int i = 0; i < s->n_reqs; i++)
        if (s->reqs[i].release_ns >= r->origin_ns) r->req_idx[r->n_reqs++] = i;
    for (int i = 0; i < s->n_units; i++) {
        x->unit_of_id[i] = -1;
        if (s->units[i].issue_ns < r->origin_ns) continue;
        x->unit_of_id[i] = r->n_units;
        r->unit_idx[r->n_units++] = i;
    }
    for (int i = 0; i < s->n_iters; i++) {
        x->iter_of_id[i] = -1;
        if (s->iters[i].start_ns < r->origin_ns) continue;
        x->iter_of_id[i] = r->n_iters;
        r->iter_idx[r->n_iters++] = i;
    }
    int nu = r->n_units > 0 ? r->n_units : 1, ni = r->n_iters > 0 ? r->n_iters : 1;
    x->u_file = calloc((size_t)nu, sizeof *x->u_file);
    x->staging = calloc((size_t)nu, sizeof *x->staging);
    x->u_start = calloc((size_t)nu, sizeof *x->u_start);
    x->u_len = calloc((size_t)nu, sizeof *x->u_len);
    x->hop_end = calloc((size_t)nu, sizeof *x->hop_end);
    x->hop_start = calloc((size_t)nu, sizeof *x->hop_start);
    x->u_done = calloc((size_t)nu, sizeof *x->u_done);
    x->it_done = calloc((size_t)ni, sizeof *x->it_done);
    x->it_start = calloc((size_t)ni, sizeof *x->it_start);
    x->ly_end = calloc((size_t)ni * (size_t)s->layers, sizeof *x->ly_end);
    x->ly_done = calloc((size_t)ni * (size_t)s->layers, sizeof *x->ly_done);
    r->layer_stage = calloc((size_t)ni * (size_t)s->layers, sizeof *r->layer_stage);
    r->layer_cpu = calloc((size_t)ni * (size_t)s->layers, sizeof *r->layer_cpu);
    x->lane_off = calloc((size_t)ni + 1, sizeof *x->lane_off);
    if (!x->u_file || !x->staging || !x->u_start || !x->u_len || !x->hop_end || !x->hop_start || !x->u_done || !x->it_done ||
        !x->it_start || !x->ly_end || !x->ly_done || !r->layer_stage || !r->layer_cpu || !x->lane_off)
        return kv_err(e, "execute: out of memory");
    for (int q = 0; q < EX_NQ; q++) {
        x->q[q] = calloc((size_t)nu * SCH_MAX_HOPS, sizeof **x->q);
        if (!x->q[q]) return kv_err(e, "execute: out of memory");
    }
    for (int k = 0; k < r->n_iters; k++) x->lane_off[k + 1] = x->lane_off[k] + s->iters[r->iter_idx[k]].nlanes;
    r->n_lanes = x->lane_off[r->n_iters];
    int nl = r->n_lanes > 0 ? r->n_lanes : 1;
    x->lane_start = calloc((size_t)nl, sizeof *x->lane_start);
    x->lane_end = calloc((size_t)nl, sizeof *x->lane_end);
    r->lane_ns = calloc((size_t)nl, sizeof *r->lane_ns);
    r->lane_end_ns = calloc((size_t)nl, sizeof *r->lane_end_ns);
    if (!x->lane_start || !x->lane_end || !r->lane_ns || !r->lane_end_ns) return kv_err(e, "execute: out of memory");
    for (int k = 0; k < r->n_units; k++) {
        const SchUnit *u = &s->units[r->unit_idx[k]];
        int fi = file_of(x, u, e);
        if (fi < 0) return -1;
        x->u_file[k] = fi;
        int64_t end = u->offset + u->bytes;
        if (end > x->files[fi].bytes) x->files[fi].bytes = end;
        x->u_start[k] = u->offset / EX_ALIGN * EX_ALIGN;
        x->u_len[k] = (end + EX_ALIGN - 1) / EX_ALIGN * EX_ALIGN - x->u_start[k];
        if (u->tier != SCH_TIER_DRAM && !x->cuda) { /* read or fetched here, then copied */
            if (posix_memalign((void **)&x->staging[k], EX_ALIGN, (size_t)x->u_len[k]) != 0) return kv_err(e, "execute: out of memory");
            memset(x->staging[k], 0, (size_t)x->u_len[k]);
        }
        static const char *const tier_name[] = {"dram", "ssd", "remote"}, *const ch_name[] = {"ssd", "h2d", "nic_in"};
        static const int first_ch[] = {SCH_CH_H2D, SCH_CH_SSD, SCH_CH_NIC}; /* a tier's own link comes first */
        if (u->nhops < 1 || u->hop[0].ch != first_ch[u->tier])
            return kv_err(e, "execute: unit %llu: a %s-tier unit whose first hop is %s: expected %s", (unsigned long long)u->id,
                          tier_name[u->tier], u->nhops < 1 ? "missing" : ch_name[u->hop[0].ch], ch_name[first_ch[u->tier]]);
        for (int h = 0; h < u->nhops; h++) {
            int c = u->hop[h].ch;
            if ((c == SCH_CH_SSD && u->tier != SCH_TIER_SSD) || (c == SCH_CH_NIC && u->tier != SCH_TIER_REMOTE))
                return kv_err(e, "execute: unit %llu: an %s hop on a %s-tier unit", (unsigned long long)u->id, ch_name[c], tier_name[u->tier]);
            /* h2d: the unit's stage's own link; nic: the one NIC, or the unit's stage's (nic_per_stage) */
            int q = c == SCH_CH_SSD ? EX_Q_SSD : c == SCH_CH_NIC ? EX_Q_NIC(s->nic_per_stage ? u->stage : 0) : EX_Q_H2D(u->stage);
            x->q[q][x->nq[q]++] = (ExHopRef){k, h, u->hop[h].start_ns};
            if (u->hop[h].bytes > x->dev_bytes) x->dev_bytes = u->hop[h].bytes;
        }
    }
    if (o->race && race_setup(x, e) != 0) return -1; /* the files known, not yet written */
    if (x->cuda) { /* the staging buffers: pinned (the h2d copies are DMA from them), one allocation cut at 4 KiB multiples */
        size_t total = 0;
        for (int k = 0; k < r->n_units; k++)
            if (s->units[r->unit_idx[k]].tier != SCH_TIER_DRAM) total += (size_t)x->u_len[k];
        if (total > 0) {
            if (probe_cuda_pinned_alloc(&x->stage_pin, total, EX_ALIGN, e) != 0) return kv_err_prefix(e, "execute: staging buffers: ");
            memset(x->stage_pin.p, 0, total);
            size_t off = 0;
            for (int k = 0; k < r->n_units; k++)
                if (s->units[r->unit_idx[k]].tier != SCH_TIER_DRAM) {
                    x->staging[k] = (unsigned char *)x->stage_pin.p + off; /* u_len[k] is a multiple of EX_ALIGN */
                    off += (size_t)x->u_len[k];
                }
        }
    }
    for (int q = 0; q < EX_NQ; q++) qsort(x->q[q], (size_t)x->nq[q], sizeof *x->q[q], cmp_hop);
    const char *dir = o->scratch_dir && *o->scratch_dir ? o->scratch_dir : getenv("TMPDIR");
    if (!dir || !*dir) dir = "/tmp";
    x->o_direct = 1;
    int64_t remote_bytes = 0;
    for (int i = 0; i < x->n_files; i++) {
        ExFile *f = &x->files[i];
        f->bytes = (f->bytes + EX_ALIGN - 1) / EX_ALIGN * EX_ALIGN;
        if (f->tier == SCH_TIER_REMOTE) { /* in the remote store's memory, one file after another */
            f->rbase = remote_bytes;
            remote_bytes += f->bytes;
            continue;
        }
        if (f->tier == SCH_TIER_DRAM) {
            if (x->cuda) { /* cuda: the DRAM tier is pinned host memory (the engine's h2d link rate is pinned's) */
                if (probe_cuda_pinned_alloc(&f->pin, (size_t)f->bytes, EX_ALIGN, e) != 0) return kv_err_prefix(e, "execute: DRAM tier %s: ", f->name);
                f->host = f->pin.p;
            } else {
                f->host = malloc((size_t)f->bytes);
            }
            if (!f->host) return kv_err(e, "execute: out of memory");
            memset(f->host, 7, (size_t)f->bytes);
            continue;
        }
        if (write_file(f, dir, e) != 0 || open_for_read(f, &x->o_direct, e) != 0) return -1;
    }
    /* the remote store: its server processes started before any thread of the replay (and before the
     * kernels' buffers: a fork copies the page tables) */
    if (remote_bytes > 0) {
        x->n_nics = s->nic_per_stage ? s->stages : 1;
        if (rstore_open(&x->rstore, remote_bytes, x->n_nics, e) != 0) return kv_err_prefix(e, "execute: the remote tier: ");
    }
    if (ex_compute_alloc(x, e) != 0) return -1;
    return x->cuda ? cuda_prepare(x, e) : 0;
}

void ex_drop_caches(Ex *x)
{
    if (x->o_direct) return;
    for (int i = 0; i < x->n_files; i++)
        if (x->files[i].fd >= 0) posix_fadvise(x->files[i].fd, 0, 0, POSIX_FADV_DONTNEED);
}
