/* execute_io.c — kvcal execute: the IO side: reads of a unit's bytes, the channel threads. See
 * execute.h for what a replay does and execute_int.h for the state its files share. */
#include "calibrate/execute_int.h"

/* read [off, off + left) of f (4 KiB aligned for O_DIRECT) into dst, at most 1 MiB per call */
int ex_pread_all(const ExFile *f, unsigned char *dst, int64_t off, int64_t left, KvErr *e)
{
    while (left > 0) {
        size_t n = (size_t)(left < EX_IO_BYTES ? left : EX_IO_BYTES);
        ssize_t got = pread(f->fd, dst, n, (off_t)off);
        if (got < 0) {
            if (errno == EINTR) continue;
            return kv_err(e, "%s: read of %zu bytes at %lld failed: %s", f->path, n, (long long)off, strerror(errno));
        }
        if (got == 0) return kv_err(e, "%s: short read at %lld", f->path, (long long)off);
        dst += got;
        off += got;
        left -= got;
    }
    return 0;
}

static int read_range(Ex *x, int u, KvErr *e) { return ex_pread_all(&x->files[x->u_file[u]], x->staging[u], x->u_start[u], x->u_len[u], e); }

/* a remote unit's bytes fetched from the remote store over NIC connection `conn` into its staging
 * buffer (at the unit's offset within its aligned range, as a read leaves them) */
static int fetch_unit(Ex *x, int conn, int u, const SchUnit *su, KvErr *e)
{
    const ExFile *f = &x->files[x->u_file[u]];
    return rstore_fetch(&x->rstore, conn, f->rbase + su->offset, su->bytes, x->staging[u] + (su->offset - x->u_start[u]), e);
}

/* pin the calling thread to `cpu` (-1: leave it); 0 when pinned or left, -1 when refused */
int ex_pin_to(int cpu)
{
    if (cpu < 0) return 0;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0 ? 0 : -1;
}

void *ex_chan_main(void *p)
{
    ChanArg *ca = p;
    Ex *x = ca->x;
    (void)ex_pin_to(x->io_cpu); /* refused (a restricted container): the thread runs unpinned */
    const Schedule *s = x->s;
    KvErr e;
    if (x->cuda && probe_cuda_bind(&x->dev, &e) != 0) {
        ex_fail(x, &e);
        return NULL;
    }
    for (int i = 0; i < x->nq[ca->q]; i++) {
        ExHopRef *hr = &x->q[ca->q][i];
        const SchUnit *su = &s->units[x->r->unit_idx[hr->u]];
        pthread_mutex_lock(&x->mu);
        for (;;) {
            if (x->failed) break;
            int64_t at = -1;
            int res = -1;
            int ready = hr->h > 0 ? x->hop_end[hr->u][hr->h - 1] >= 0 : ex_cause_ok(x, &su->after, &at, &res);
            if (ready) break;
            if (res >= 0) ex_resolve_landing(x, res);
            else if (at >= 0) ex_wait_until_time(x, at);
            else pthread_cond_wait(&x->cv, &x->mu);
        }
        int stop = x->failed;
        pthread_mutex_unlock(&x->mu);
        if (stop) break;
        int64_t t = ex_now(x);
        int rc = 0, last = hr->h == su->nhops - 1, device_copy = 0;
        if (ca->q == EX_Q_SSD) {
            rc = read_range(x, hr->u, &e);
            if (rc == 0) ex_io_throttle(x, t, su->hop[hr->h].bytes, x->io_rate, 0);
        } else if (ca->q >= EX_Q_NIC(0)) {
            rc = fetch_unit(x, ca->q - EX_Q_NIC(0), hr->u, su, &e);
            if (rc == 0) ex_io_throttle(x, t, su->hop[hr->h].bytes, x->net_rate, x->net_lat_ns);
        } else { /* h2d: from the staging copy (read from SSD, fetched from the remote store) or the DRAM tier's host copy, into the unit's stage */
            const unsigned char *src = su->tier != SCH_TIER_DRAM ? x->staging[hr->u] + (su->offset - x->u_start[hr->u])
                                                                : x->files[x->u_file[hr->u]].host + su->offset;
            size_t n = (size_t)su->hop[hr->h].bytes <= (size_t)x->dev_bytes ? (size_t)su->hop[hr->h].bytes : (size_t)x->dev_bytes;
            ExStage *ug = &x->stage[su->stage];
            if (x->cuda) { /* enqueued on the stage's copy stream, from pinned memory; the landing is an event */
                device_copy = 1;
                rc = probe_cuda_copy(ug->copy, ug->dev_buf, src, n, 1, &e);
                if (rc == 0) rc = probe_cuda_record(ug->copy, x->u_ev[hr->u], &e);
                /* a later hop of the unit starts once this one ended: the host must see that end */
                if (rc == 0 && !last) rc = probe_cuda_event_sync(x->u_ev[hr->u], &e);
                if (rc != 0) kv_err_prefix(&e, "execute: the h2d copy of unit %llu: ", (unsigned long long)su->id);
            } else {
                memcpy(ug->dev_buf, src, n);
            }
        }
        if (rc != 0) {
            ex_fail(x, &e);
            break;
        }
        int64_t t1 = ex_now(x);
        pthread_mutex_lock(&x->mu);
        x->hop_start[hr->u][hr->h] = t; /* cuda h2d: when the host enqueued it (the device times are the events') */
        x->hop_end[hr->u][hr->h] = t1;
        if (last && device_copy) x->u_issued[hr->u] = 1; /* landed: the event's time (ex_resolve_landing, cuda_collect) */
        else if (last) x->u_done[hr->u] = t1;
        pthread_cond_broadcast(&x->cv);
        pthread_mutex_unlock(&x->mu);
    }
    return NULL;
}
