/* probe_io.c — the IO probes of probe.h: host<->device link copies (kernels/gpu.h on CUDA, memcpy
 * on the CPU) and SSD reads/writes with O_DIRECT through io_uring (KV_HAVE_URING) or threads.
 *
 * Responsible for: the buffers, files and engines of these probes, their timed workloads (handed
 * to timing_run), and the fallbacks named in probe.h (buffered IO when O_DIRECT is refused, threads
 * when io_uring is unavailable), each recorded in the SSD note.
 * Not responsible for: which sizes are measured (calib_run.c), statistics (timing.c).
 *
 * Link timing: CUDA copies are timed with the context's events (pinned memory); the _bidir ops
 * first enqueue two copies of max(bytes, 32 MiB) in the other direction on a second context's
 * stream, so that direction is busy for the whole timed copy, and wait for them untimed. Pageable
 * copies are timed on the host clock up to a stream sync. On the CPU, memcpy is timed with
 * CLOCK_MONOTONIC and the _bidir ops keep a second thread copying the other way until the timed
 * copy is done.
 * SSD timing: host clock from the first submission to the last completion (threads: from opening
 * the gate the IO threads wait on, their wake-up included, to the last join; thread creation is not
 * timed). Each repetition uses the other half of every file, so consecutive repetitions never
 * touch the same blocks.
 * Invariants: files are created by probe_ssd_open and removed by probe_ssd_close (also when open
 * fails half-way); an IO error or a short transfer fails the measurement with the file, offset and
 * errno text.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#ifdef KV_HAVE_URING
#include <liburing.h>
#endif

#include "kernels/gpu.h"
#include "calibrate/probe.h"
#include "calibrate/remote_store.h"

#define LINK_BUSY_MIN_BYTES ((size_t)32 << 20)
#define SSD_ALIGN 4096
#define SSD_MAX_FILES 64
#define SSD_MAX_SLOT_BYTES ((size_t)256 << 20) /* read buffers beyond this are shared between IOs */
#define TMPFS_MAGIC_NUMBER 0x01021994

/* ==================================================================== host link */

struct ProbeLink {
    int cuda;
    size_t max_bytes, busy_bytes;
    /* cuda */
    KgpuCtx *ctx_a, *ctx_b;        /* timed stream, busy stream */
    void *h_a, *h_b, *h_busy;      /* pinned host buffers */
    void *d_a, *d_busy;            /* device buffers */
    /* cpu */
    unsigned char *m_a, *m_b, *m_c, *m_d;
};

void probe_link_close(ProbeLink *l)
{
    if (!l) return;
    KvErr e2;
    if (l->cuda) {
        if (l->ctx_a) {
            kgpu_free(l->ctx_a, l->d_a, &e2);
            kgpu_free(l->ctx_a, l->d_busy, &e2);
        }
        kgpu_host_free(l->h_a, 1);
        kgpu_host_free(l->h_b, 1);
        kgpu_host_free(l->h_busy, 1);
        kgpu_ctx_destroy(l->ctx_b);
        kgpu_ctx_destroy(l->ctx_a);
    } else {
        free(l->m_a);
        free(l->m_b);
        free(l->m_c);
        free(l->m_d);
    }
    free(l);
}

ProbeLink *probe_link_open(int cuda, int device, size_t max_bytes, KvErr *e)
{
    ProbeLink *l = calloc(1, sizeof *l);
    if (!l) {
        kv_err(e, "link probe: out of memory");
        return NULL;
    }
    l->cuda = cuda;
    l->max_bytes = max_bytes ? max_bytes : 1;
    l->busy_bytes = l->max_bytes > LINK_BUSY_MIN_BYTES ? l->max_bytes : LINK_BUSY_MIN_BYTES;
    if (cuda) {
        if (!(l->ctx_a = kgpu_ctx_create(device, e)) || !(l->ctx_b = kgpu_ctx_create(device, e))) goto fail;
        if (kgpu_host_alloc(l->max_bytes, 1, &l->h_a, e) != 0 || kgpu_host_alloc(l->max_bytes, 1, &l->h_b, e) != 0 ||
            kgpu_host_alloc(l->busy_bytes, 1, &l->h_busy, e) != 0 || kgpu_malloc(l->ctx_a, l->max_bytes, &l->d_a, e) != 0 ||
            kgpu_malloc(l->ctx_a, l->busy_bytes, &l->d_busy, e) != 0)
            goto fail;
        memset(l->h_a, 0x5a, l->max_bytes);
        memset(l->h_b, 0, l->max_bytes);
        memset(l->h_busy, 0x3c, l->busy_bytes);
        if (kgpu_memset0(l->ctx_a, l->d_a, l->max_bytes, e) != 0 || kgpu_memset0(l->ctx_a, l->d_busy, l->busy_bytes, e) != 0 ||
            kgpu_sync(l->ctx_a, e) != 0)
            goto fail;
    } else {
        l->m_a = malloc(l->max_bytes);
        l->m_b = malloc(l->max_bytes);
        l->m_c = malloc(l->busy_bytes);
        l->m_d = malloc(l->busy_bytes);
        if (!l->m_a || !l->m_b || !l->m_c || !l->m_d) {
            kv_err(e, "link probe: cannot allocate 2 x %zu + 2 x %zu bytes of host memory", l->max_bytes, l->busy_bytes);
            goto fail;
        }
        /* touch every page before timing */
        memset(l->m_a, 0x5a, l->max_bytes);
        memset(l->m_b, 0, l->max_bytes);
        memset(l->m_c, 0x3c, l->busy_bytes);
        memset(l->m_d, 0, l->busy_bytes);
    }
    return l;
fail:
    kv_err_prefix(e, "link probe: ");
    probe_link_close(l);
    return NULL;
}

typedef struct {
    ProbeLink *l;
    CostOp op;
    size_t bytes;
} LinkWork;

/* CPU _bidir: a thread copying the other direction until told to stop. */
typedef struct {
    unsigned char *dst, *src;
    size_t bytes;
    atomic_int started, stop;
} BusyCopy;

static void *busy_copy_main(void *arg)
{
    BusyCopy *b = arg;
    atomic_store(&b->started, 1);
    while (!atomic_load(&b->stop)) memcpy(b->dst, b->src, b->bytes);
    return NULL;
}

static int link_rep_cpu(LinkWork *w, double *ns, KvErr *e)
{
    ProbeLink *l = w->l;
    int h2d = w->op == OP_H2D || w->op == OP_H2D_BIDIR;
    int bidir = w->op == OP_H2D_BIDIR || w->op == OP_D2H_BIDIR;
    /* "host" buffer m_a, "device" buffer m_b: h2d copies a -> b, d2h b -> a */
    unsigned char *dst = h2d ? l->m_b : l->m_a, *src = h2d ? l->m_a : l->m_b;
    BusyCopy b = {.dst = h2d ? l->m_c : l->m_d, .src = h2d ? l->m_d : l->m_c, .bytes = l->busy_bytes};
    atomic_init(&b.started, 0);
    atomic_init(&b.stop, 0);
    pthread_t th;
    if (bidir) {
        if (pthread_create(&th, NULL, busy_copy_main, &b) != 0) return kv_err(e, "link probe: cannot start a copy thread");
        while (!atomic_load(&b.started)) sched_yield();
    }
    int64_t t0 = timing_now_ns();
    memcpy(dst, src, w->bytes);
    int64_t t1 = timing_now_ns();
    if (bidir) {
        atomic_store(&b.stop, 1);
        pthread_join(th, NULL);
    }
    *ns = (double)(t1 - t0);
    return 0;
}

static int link_rep_cuda(LinkWork *w, double *ns, KvErr *e)
{
    ProbeLink *l = w->l;
    int h2d = w->op == OP_H2D || w->op == OP_H2D_BIDIR;
    int bidir = w->op == OP_H2D_BIDIR || w->op == OP_D2H_BIDIR;
    size_t busy = w->bytes > LINK_BUSY_MIN_BYTES ? w->bytes : LINK_BUSY_MIN_BYTES;
    if (bidir)
        for (int i = 0; i < 2; i++) {
            int rc = h2d ? kgpu_copy_d2h(l->ctx_b, l->h_busy, l->d_busy, busy, e)
                         : kgpu_copy_h2d(l->ctx_b, l->d_busy, l->h_busy, busy, e);
            if (rc != 0) return -1;
        }
    float ms = 0;
    if (kgpu_timer_start(l->ctx_a, e) != 0) return -1;
    int rc = h2d ? kgpu_copy_h2d(l->ctx_a, l->d_a, l->h_a, w->bytes, e) : kgpu_copy_d2h(l->ctx_a, l->h_b, l->d_a, w->bytes, e);
    if (rc != 0 || kgpu_timer_stop(l->ctx_a, &ms, e) != 0) return -1;
    if (bidir && kgpu_sync(l->ctx_b, e) != 0) return -1;
    *ns = (double)ms * 1e6;
    return 0;
}

static int link_rep(void *ctx, int timed, double *ns, KvErr *e)
{
    LinkWork *w = ctx;
    return w->l->cuda ? link_rep_cuda(w, ns, e) : link_rep_cpu(w, ns, e);
}

int probe_link_measure(ProbeLink *l, CostOp op, int64_t bytes, const TimingCfg *cfg, TimingStats *st, KvErr *e)
{
    if (op != OP_H2D && op != OP_D2H && op != OP_H2D_BIDIR && op != OP_D2H_BIDIR)
        return kv_err(e, "link probe: op %s is not a host link op", cost_op_name(op) ? cost_op_name(op) : "?");
    if (bytes < 1 || (uint64_t)bytes > l->max_bytes)
        return kv_err(e, "link probe: %lld bytes: expected 1..%zu", (long long)bytes, l->max_bytes);
    LinkWork w = {l, op, (size_t)bytes};
    return timing_run(cfg, link_rep, &w, st, e);
}

int probe_link_pageable(ProbeLink *l, int64_t bytes, double *h2d_bytes_per_s, double *d2h_bytes_per_s, KvErr *e)
{
    if (bytes < 1 || (uint64_t)bytes > l->max_bytes)
        return kv_err(e, "link probe: pageable %lld bytes: expected 1..%zu", (long long)bytes, l->max_bytes);
    TimingCfg cfg = {.warmup = 1, .min_reps = 5, .max_reps = 5};
    TimingStats st;
    if (!l->cuda) {
        if (probe_link_measure(l, OP_H2D, bytes, &cfg, &st, e) != 0) return -1;
        *h2d_bytes_per_s = (double)bytes / (st.median_ns * 1e-9);
        if (probe_link_measure(l, OP_D2H, bytes, &cfg, &st, e) != 0) return -1;
        *d2h_bytes_per_s = (double)bytes / (st.median_ns * 1e-9);
        return 0;
    }
    void *h = NULL;
    if (kgpu_host_alloc((size_t)bytes, 0, &h, e) != 0) return -1;
    memset(h, 0x11, (size_t)bytes);
    double med[2];
    for (int dir = 0; dir < 2; dir++) {
        double samples[6];
        for (int i = 0; i < 6; i++) {
            int64_t t0 = timing_now_ns();
            int rc = dir == 0 ? kgpu_copy_h2d(l->ctx_a, l->d_a, h, (size_t)bytes, e)
                              : kgpu_copy_d2h(l->ctx_a, h, l->d_a, (size_t)bytes, e);
            if (rc != 0 || kgpu_sync(l->ctx_a, e) != 0) {
                kgpu_host_free(h, 0);
                return -1;
            }
            samples[i] = (double)(timing_now_ns() - t0);
        }
        timing_stats(samples + 1, 5, &st); /* the first copy is the warm-up */
        med[dir] = st.median_ns;
    }
    kgpu_host_free(h, 0);
    *h2d_bytes_per_s = (double)bytes / (med[0] * 1e-9);
    *d2h_bytes_per_s = (double)bytes / (med[1] * 1e-9);
    return 0;
}

/* ==================================================================== SSD */

struct ProbeSsd {
    int n_dirs, n_files;
    char dirs[PROBE_SSD_MAX_DIRS][1024];
    char paths[SSD_MAX_FILES][1100];
    int fds[SSD_MAX_FILES];
    int64_t file_bytes;
    int direct;          /* files opened with O_DIRECT */
    int uring;           /* io_uring usable */
    unsigned char *buf;  /* aligned IO buffer */
    size_t buf_bytes;
    int half;            /* which half of each file the next repetition uses */
    char note[512];
};

static int round_down_align(int64_t v) { return (int)(v / SSD_ALIGN * SSD_ALIGN); }

static int ssd_ensure_buf(ProbeSsd *s, size_t bytes, KvErr *e)
{
    if (s->buf_bytes >= bytes) return 0;
    free(s->buf);
    s->buf = NULL;
    s->buf_bytes = 0;
    void *p = NULL;
    if (posix_memalign(&p, SSD_ALIGN, bytes) != 0 || !p) return kv_err(e, "ssd probe: cannot allocate %zu bytes", bytes);
    memset(p, 0xa5, bytes);
    s->buf = p;
    s->buf_bytes = bytes;
    return 0;
}

void probe_ssd_close(ProbeSsd *s)
{
    if (!s) return;
    for (int f = 0; f < s->n_files; f++) {
        if (s->fds[f] >= 0) close(s->fds[f]);
        if (s->paths[f][0]) unlink(s->paths[f]);
    }
    free(s->buf);
    free(s);
}

const char *probe_ssd_note(const ProbeSsd *s) { return s ? s->note : ""; }

int probe_ssd_remove_stale(const char *dir, int *removed, char *names, size_t cap, KvErr *e)
{
    *removed = 0;
    if (cap) names[0] = '\0';
    DIR *d = opendir(dir);
    if (!d) return kv_err(e, "scratch %s: cannot read the directory: %s", dir, strerror(errno));
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid = 0;
        int f = 0, end = 0;
        /* exactly kvcal-ssd-<pid>-<n>.tmp, as probe_ssd_open names them */
        if (sscanf(de->d_name, "kvcal-ssd-%ld-%d.tmp%n", &pid, &f, &end) != 2 || de->d_name[end] || pid <= 0 || f < 0)
            continue;
        if (pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno == EPERM) continue; /* its owner lives */
        char path[4400];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        if (lstat(path, &st) != 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid()) continue;
        if (unlink(path) == 0) {
            if (cap) kv_catf(names, cap, "%s%s", (*removed)++ ? ", " : "", de->d_name);
            else (*removed)++;
        }
    }
    closedir(d);
    return 0;
}

void probe_ssd_use_threads(ProbeSsd *s)
{
    if (!s || !s->uring) return;
    s->uring = 0;
    char *p = strstr(s->note, "io_uring");
    if (p) {
        char rest[512];
        snprintf(rest, sizeof rest, "%s", p + strlen("io_uring"));
        snprintf(p, sizeof s->note - (size_t)(p - s->note), "threads (forced)%s", rest);
    }
}

/* Write a whole file once (untimed) so reads see real blocks; 0, or -1 with errno kept. */
static int ssd_write_whole(ProbeSsd *s, int fd)
{
    size_t chunk = s->buf_bytes < ((size_t)1 << 20) ? s->buf_bytes : ((size_t)1 << 20);
    for (int64_t off = 0; off < s->file_bytes; off += (int64_t)chunk) {
        size_t len = (size_t)(s->file_bytes - off) < chunk ? (size_t)(s->file_bytes - off) : chunk;
        ssize_t w = pwrite(fd, s->buf, len, off);
        if (w != (ssize_t)len) {
            if (w >= 0) errno = EIO;
            return -1;
        }
    }
    return fdatasync(fd);
}

static const char *fs_name(long type)
{
    switch (type) {
    case 0xEF53: return "ext4";
    case 0x58465342: return "xfs";
    case 0x9123683E: return "btrfs";
    case TMPFS_MAGIC_NUMBER: return "tmpfs";
    case 0x794c7630: return "overlayfs";
    case 0x6969: return "nfs";
    case 0x2fc12fc1: return "zfs";
    default: return "other fs";
    }
}

ProbeSsd *probe_ssd_open(const char *const *dirs, int n_dirs, int max_files, int64_t file_bytes, KvErr *e)
{
    if (n_dirs < 1 || n_dirs > PROBE_SSD_MAX_DIRS) {
        kv_err(e, "ssd probe: %d scratch directories: expected 1..%d", n_dirs, PROBE_SSD_MAX_DIRS);
        return NULL;
    }
    if (max_files < 1 || max_files > SSD_MAX_FILES) {
        kv_err(e, "ssd probe: %d files: expected 1..%d", max_files, SSD_MAX_FILES);
        return NULL;
    }
    file_bytes = (file_bytes + 2 * SSD_ALIGN - 1) / (2 * SSD_ALIGN) * (2 * SSD_ALIGN);
    if (file_bytes < 2 * SSD_ALIGN) file_bytes = 2 * SSD_ALIGN;
    ProbeSsd *s = calloc(1, sizeof *s);
    if (!s) {
        kv_err(e, "ssd probe: out of memory");
        return NULL;
    }
    for (int f = 0; f < SSD_MAX_FILES; f++) s->fds[f] = -1;
    s->n_dirs = n_dirs;
    s->file_bytes = file_bytes;
    s->direct = 1;
    const char *fsn[PROBE_SSD_MAX_DIRS];
    int on_tmpfs = 0;
    for (int d = 0; d < n_dirs; d++) {
        snprintf(s->dirs[d], sizeof s->dirs[d], "%s", dirs[d]);
        struct stat dst;
        errno = 0;
        if (stat(dirs[d], &dst) != 0 || !S_ISDIR(dst.st_mode)) { /* never created here: a typo must not measure '/' */
            int er = errno;
            kv_err(e, "scratch %s: %s; expected a writable directory that exists (kvcal run --create-scratch creates it)",
                   dirs[d], er == ENOENT ? "no such directory" : er ? strerror(er) : "not a directory");
            goto fail;
        }
        struct statvfs vfs;
        int files_here = (max_files + n_dirs - 1 - d) / n_dirs;
        uint64_t need = (uint64_t)files_here * (uint64_t)file_bytes + (64u << 20);
        if (statvfs(dirs[d], &vfs) == 0) {
            uint64_t avail = (uint64_t)vfs.f_bavail * vfs.f_frsize;
            if (avail < need) {
                kv_err(e, "scratch %s: %llu MiB free, the SSD probes need %llu MiB (%d files of %lld MiB + 64 MiB)", dirs[d],
                       (unsigned long long)(avail >> 20), (unsigned long long)(need >> 20), files_here,
                       (long long)(file_bytes >> 20));
                goto fail;
            }
        }
        struct statfs sfs;
        fsn[d] = statfs(dirs[d], &sfs) == 0 ? fs_name((long)sfs.f_type) : "unknown fs";
        if (statfs(dirs[d], &sfs) == 0 && (long)sfs.f_type == TMPFS_MAGIC_NUMBER) on_tmpfs = 1;
    }
    if (ssd_ensure_buf(s, (size_t)1 << 20, e) != 0) goto fail;
    for (int f = 0; f < max_files; f++) {
        const char *dir = s->dirs[f % n_dirs];
        snprintf(s->paths[f], sizeof s->paths[f], "%s/kvcal-ssd-%ld-%d.tmp", dir, (long)getpid(), f);
        s->n_files = f + 1;
        int fd = -1;
        if (s->direct) {
            fd = open(s->paths[f], O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
            if (fd < 0 && errno == EINVAL) s->direct = 0; /* the filesystem refuses O_DIRECT */
        }
        if (fd < 0 && !s->direct) fd = open(s->paths[f], O_RDWR | O_CREAT | O_TRUNC, 0600);
        if (fd < 0) {
            kv_err(e, "scratch %s: cannot create %s: %s; expected a writable directory", dir, s->paths[f], strerror(errno));
            s->paths[f][0] = '\0';
            goto fail;
        }
        s->fds[f] = fd;
        if (ssd_write_whole(s, fd) != 0) {
            if (errno == EINVAL && s->direct) {
                /* O_DIRECT accepted at open but refused for IO: reopen every file buffered */
                s->direct = 0;
                for (int g = 0; g <= f; g++) {
                    close(s->fds[g]);
                    s->fds[g] = open(s->paths[g], O_RDWR, 0600);
                    if (s->fds[g] < 0 || ssd_write_whole(s, s->fds[g]) != 0) {
                        kv_err(e, "scratch %s: writing %s: %s", dir, s->paths[g], strerror(errno));
                        goto fail;
                    }
                }
                continue;
            }
            kv_err(e, "scratch %s: writing %lld bytes to %s: %s", dir, (long long)file_bytes, s->paths[f], strerror(errno));
            goto fail;
        }
    }
#ifdef KV_HAVE_URING
    {
        struct io_uring ring;
        if (io_uring_queue_init(8, &ring, 0) == 0) {
            s->uring = 1;
            io_uring_queue_exit(&ring);
        }
    }
#endif
    char size[32];
    if (file_bytes >= (1 << 20)) snprintf(size, sizeof size, "%lld MiB", (long long)(file_bytes >> 20));
    else snprintf(size, sizeof size, "%lld KiB", (long long)(file_bytes >> 10));
    int len = snprintf(s->note, sizeof s->note, "ssd: %d file%s of %s in", max_files, max_files > 1 ? "s" : "", size);
    for (int d = 0; d < n_dirs && len < (int)sizeof s->note - 64; d++)
        len += snprintf(s->note + len, sizeof s->note - (size_t)len, "%s %s (%s)", d ? "," : "", s->dirs[d], fsn[d]);
    snprintf(s->note + len, sizeof s->note - (size_t)len, ", %s, %s%s%s", s->direct ? "O_DIRECT" : "buffered IO (O_DIRECT refused)",
             s->uring ? "io_uring" : "threads",
#ifdef KV_HAVE_URING
             s->uring ? "" : " (io_uring unavailable)",
#else
             " (built without liburing)",
#endif
             on_tmpfs ? "; WARNING: tmpfs scratch measures memory, not an SSD" : "");
    return s;
fail:
    probe_ssd_close(s);
    return NULL;
}

typedef struct {
    ProbeSsd *s;
    int write;
    int n_files, qd;
    int64_t per_file;   /* bytes per file, a multiple of SSD_ALIGN */
    int io_bytes;       /* IO size */
    int ios_per_file;
    size_t slot_bytes;  /* distance between IO buffers (0: all IOs share one) */
    int n_slots;
#ifdef KV_HAVE_URING
    struct io_uring ring;
    int ring_ok;
#endif
} SsdWork;

static int64_t io_offset(const SsdWork *w, int i) { return (int64_t)w->s->half * (w->s->file_bytes / 2) + (int64_t)i * w->io_bytes; }
static int io_len(const SsdWork *w, int i)
{
    int64_t left = w->per_file - (int64_t)i * w->io_bytes;
    return left < w->io_bytes ? (int)left : w->io_bytes;
}
static unsigned char *io_buf(const SsdWork *w, int slot) { return w->s->buf + (w->slot_bytes ? (size_t)(slot % w->n_slots) * w->slot_bytes : 0); }

static int io_error(const SsdWork *w, int f, int i, int err, long got, KvErr *e)
{
    if (err) return kv_err(e, "ssd probe: %s %s at offset %lld: %s", w->write ? "writing" : "reading", w->s->paths[f],
                           (long long)io_offset(w, i), strerror(err));
    return kv_err(e, "ssd probe: %s %s at offset %lld: %ld of %d bytes", w->write ? "short write to" : "short read from",
                  w->s->paths[f], (long long)io_offset(w, i), got, io_len(w, i));
}

/* ---- threads engine: thread (f, j) does IOs j, j + qd, ... of file f ---- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int go;     /* 1: start the IOs; -1: leave without IO (setup failed) */
} IoGate;

typedef struct {
    SsdWork *w;
    IoGate *gate;
    int f, j;
    int err, bad_i;
    long got;
} IoThread;

static void *io_thread_main(void *arg)
{
    IoThread *t = arg;
    SsdWork *w = t->w;
    int fd = w->s->fds[t->f];
    unsigned char *buf = io_buf(w, t->f * w->qd + t->j);
    pthread_mutex_lock(&t->gate->mu);
    while (t->gate->go == 0) pthread_cond_wait(&t->gate->cv, &t->gate->mu);
    int go = t->gate->go;
    pthread_mutex_unlock(&t->gate->mu);
    for (int i = t->j; go > 0 && i < w->ios_per_file; i += w->qd) {
        int len = io_len(w, i);
        ssize_t r = w->write ? pwrite(fd, buf, (size_t)len, io_offset(w, i)) : pread(fd, buf, (size_t)len, io_offset(w, i));
        if (r != len) {
            t->err = r < 0 ? errno : 0;
            t->got = (long)r;
            t->bad_i = i;
            break;
        }
    }
    return NULL;
}

static void gate_open(IoGate *g, int how)
{
    pthread_mutex_lock(&g->mu);
    g->go = how;
    pthread_cond_broadcast(&g->cv);
    pthread_mutex_unlock(&g->mu);
}

static int ssd_rep_threads(SsdWork *w, double *ns, KvErr *e)
{
    int nt = w->n_files * w->qd;
    IoThread *ts = calloc((size_t)nt, sizeof *ts);
    pthread_t *th = calloc((size_t)nt, sizeof *th);
    if (!ts || !th) {
        free(ts);
        free(th);
        return kv_err(e, "ssd probe: cannot set up %d IO threads", nt);
    }
    IoGate gate = {.go = 0};
    pthread_mutex_init(&gate.mu, NULL);
    pthread_cond_init(&gate.cv, NULL);
    int started = 0, rc = 0;
    for (int k = 0; k < nt && rc == 0; k++) {
        ts[k] = (IoThread){.w = w, .gate = &gate, .f = k / w->qd, .j = k % w->qd, .bad_i = -1};
        if (pthread_create(&th[k], NULL, io_thread_main, &ts[k]) != 0)
            rc = kv_err(e, "ssd probe: cannot start IO thread %d of %d", k + 1, nt);
        else
            started++;
    }
    int64_t t0 = timing_now_ns();
    gate_open(&gate, rc == 0 ? 1 : -1);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    for (int f = 0; rc == 0 && w->write && !w->s->direct && f < w->n_files; f++)
        if (fdatasync(w->s->fds[f]) != 0) rc = kv_err(e, "ssd probe: fdatasync %s: %s", w->s->paths[f], strerror(errno));
    int64_t t1 = timing_now_ns();
    for (int i = 0; i < started && rc == 0; i++)
        if (ts[i].bad_i >= 0) rc = io_error(w, ts[i].f, ts[i].bad_i, ts[i].err, ts[i].got, e);
    pthread_mutex_destroy(&gate.mu);
    pthread_cond_destroy(&gate.cv);
    free(ts);
    free(th);
    *ns = (double)(t1 - t0);
    return rc;
}

#ifdef KV_HAVE_URING
/* ---- io_uring engine: keep qd IOs in flight per file ---- */

static int ssd_rep_uring(SsdWork *w, double *ns, KvErr *e)
{
    int next[SSD_MAX_FILES], done = 0, total = w->n_files * w->ios_per_file, inflight = 0;
    for (int f = 0; f < w->n_files; f++) next[f] = 0;
    int64_t t0 = timing_now_ns();
    for (int f = 0; f < w->n_files; f++)
        for (int j = 0; j < w->qd && next[f] < w->ios_per_file; j++) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
            if (!sqe) return kv_err(e, "ssd probe: io_uring submission queue full");
            int i = next[f]++, slot = f * w->qd + j;
            if (w->write) io_uring_prep_write(sqe, w->s->fds[f], io_buf(w, slot), (unsigned)io_len(w, i), (uint64_t)io_offset(w, i));
            else io_uring_prep_read(sqe, w->s->fds[f], io_buf(w, slot), (unsigned)io_len(w, i), (uint64_t)io_offset(w, i));
            io_uring_sqe_set_data64(sqe, ((uint64_t)f << 40) | ((uint64_t)slot << 20) | (uint64_t)i);
            inflight++;
        }
    int rc = io_uring_submit(&w->ring);
    if (rc < 0) return kv_err(e, "ssd probe: io_uring_submit: %s", strerror(-rc));
    while (done < total) {
        struct io_uring_cqe *cqe;
        rc = io_uring_wait_cqe(&w->ring, &cqe);
        if (rc < 0) return kv_err(e, "ssd probe: io_uring_wait_cqe: %s", strerror(-rc));
        uint64_t ud = io_uring_cqe_get_data64(cqe);
        int res = cqe->res;
        io_uring_cqe_seen(&w->ring, cqe);
        int f = (int)(ud >> 40), slot = (int)((ud >> 20) & 0xFFFFF), i = (int)(ud & 0xFFFFF);
        inflight--;
        if (res != io_len(w, i)) {
            /* drain what is still in flight before reporting */
            while (inflight > 0 && io_uring_wait_cqe(&w->ring, &cqe) == 0) {
                io_uring_cqe_seen(&w->ring, cqe);
                inflight--;
            }
            return io_error(w, f, i, res < 0 ? -res : 0, res, e);
        }
        done++;
        if (next[f] < w->ios_per_file) {
            struct io_uring_sqe *sqe = io_uring_get_sqe(&w->ring);
            if (!sqe) return kv_err(e, "ssd probe: io_uring submission queue full");
            int ni = next[f]++;
            if (w->write) io_uring_prep_write(sqe, w->s->fds[f], io_buf(w, slot), (unsigned)io_len(w, ni), (uint64_t)io_offset(w, ni));
            else io_uring_prep_read(sqe, w->s->fds[f], io_buf(w, slot), (unsigned)io_len(w, ni), (uint64_t)io_offset(w, ni));
            io_uring_sqe_set_data64(sqe, ((uint64_t)f << 40) | ((uint64_t)slot << 20) | (uint64_t)ni);
            inflight++;
            rc = io_uring_submit(&w->ring);
            if (rc < 0) return kv_err(e, "ssd probe: io_uring_submit: %s", strerror(-rc));
        }
    }
    if (w->write && !w->s->direct)
        for (int f = 0; f < w->n_files; f++)
            if (fdatasync(w->s->fds[f]) != 0) return kv_err(e, "ssd probe: fdatasync %s: %s", w->s->paths[f], strerror(errno));
    *ns = (double)(timing_now_ns() - t0);
    return 0;
}
#endif

static int ssd_rep(void *ctx, int timed, double *ns, KvErr *e)
{
    SsdWork *w = ctx;
    int rc;
    if (!w->s->direct && !w->write)
        for (int f = 0; f < w->n_files; f++) (void)posix_fadvise(w->s->fds[f], 0, 0, POSIX_FADV_DONTNEED);
#ifdef KV_HAVE_URING
    if (w->ring_ok) rc = ssd_rep_uring(w, ns, e);
    else
#endif
        rc = ssd_rep_threads(w, ns, e);
    w->s->half ^= 1;
    return rc;
}

int probe_ssd_measure(ProbeSsd *s, CostOp op, int64_t bytes, int qd, int n_files, const TimingCfg *cfg,
                      TimingStats *st, KvErr *e)
{
    if (op != OP_SSD_READ && op != OP_SSD_WRITE)
        return kv_err(e, "ssd probe: op %s is not an SSD op", cost_op_name(op) ? cost_op_name(op) : "?");
    if (n_files < 1 || n_files > s->n_files)
        return kv_err(e, "ssd probe: %d files: expected 1..%d (opened with %d)", n_files, s->n_files, s->n_files);
    if (qd < 1 || qd > 1024) return kv_err(e, "ssd probe: queue depth %d: expected 1..1024", qd);
    if (bytes < 1) return kv_err(e, "ssd probe: %lld bytes: expected > 0", (long long)bytes);
    SsdWork w = {.s = s, .write = op == OP_SSD_WRITE, .n_files = n_files, .qd = qd};
    w.per_file = ((bytes + n_files - 1) / n_files + SSD_ALIGN - 1) / SSD_ALIGN * SSD_ALIGN;
    if (w.per_file > s->file_bytes / 2)
        return kv_err(e, "ssd probe: %lld bytes over %d files: %lld bytes per file, the files hold %lld per repetition",
                      (long long)bytes, n_files, (long long)w.per_file, (long long)(s->file_bytes / 2));
    int64_t io = w.per_file < PROBE_SSD_MAX_IO_BYTES ? w.per_file : PROBE_SSD_MAX_IO_BYTES;
    w.io_bytes = round_down_align(io) < SSD_ALIGN ? SSD_ALIGN : round_down_align(io);
    w.ios_per_file = (int)((w.per_file + w.io_bytes - 1) / w.io_bytes);
    w.n_slots = n_files * qd;
    size_t want = (size_t)w.n_slots * (size_t)w.io_bytes;
    if (want > SSD_MAX_SLOT_BYTES) {
        w.n_slots = (int)(SSD_MAX_SLOT_BYTES / (size_t)w.io_bytes);
        if (w.n_slots < 1) w.n_slots = 1;
        want = (size_t)w.n_slots * (size_t)w.io_bytes;
    }
    w.slot_bytes = (size_t)w.io_bytes;
    if (ssd_ensure_buf(s, want, e) != 0) return -1;
#ifdef KV_HAVE_URING
    if (s->uring) {
        unsigned entries = 1;
        while (entries < (unsigned)(n_files * qd)) entries <<= 1;
        int rc = io_uring_queue_init(entries, &w.ring, 0);
        if (rc < 0) return kv_err(e, "ssd probe: io_uring_queue_init(%u): %s", entries, strerror(-rc));
        w.ring_ok = 1;
    }
#endif
    int rc = timing_run(cfg, ssd_rep, &w, st, e);
#ifdef KV_HAVE_URING
    if (w.ring_ok) io_uring_queue_exit(&w.ring);
#endif
    return rc;
}

/* ==================================================================== the remote store's NIC */

struct ProbeNet {
    RemoteStore rs;
    int64_t half;
    int which;
    unsigned char *buf;
};

ProbeNet *probe_net_open(int64_t max_bytes, KvErr *e)
{
    if (max_bytes < 1) {
        kv_err(e, "net probe: %lld bytes: expected > 0", (long long)max_bytes);
        return NULL;
    }
    ProbeNet *n = calloc(1, sizeof *n);
    if (!n || !(n->buf = malloc((size_t)max_bytes))) {
        free(n);
        kv_err(e, "net probe: out of memory (%lld bytes)", (long long)max_bytes);
        return NULL;
    }
    memset(n->buf, 0, (size_t)max_bytes); /* the pages touched before the first timed fetch */
    n->half = max_bytes;
    if (rstore_open(&n->rs, 2 * max_bytes, 1, e) != 0) {
        free(n->buf);
        free(n);
        kv_err_prefix(e, "net probe: ");
        return NULL;
    }
    return n;
}

typedef struct NetWork {
    ProbeNet *n;
    int64_t bytes;
} NetWork;

static int net_rep(void *ctx, int timed, double *ns, KvErr *e)
{
    NetWork *w = ctx;
    ProbeNet *n = w->n;
    int64_t t0 = timing_now_ns();
    if (rstore_fetch(&n->rs, 0, n->which ? n->half : 0, w->bytes, n->buf, e) != 0) return -1;
    *ns = (double)(timing_now_ns() - t0);
    n->which ^= 1;
    return 0;
}

int probe_net_measure(ProbeNet *n, int64_t bytes, const TimingCfg *cfg, TimingStats *st, KvErr *e)
{
    if (bytes < 1 || bytes > n->half)
        return kv_err(e, "net probe: %lld bytes: expected 1..%lld (opened for that much)", (long long)bytes, (long long)n->half);
    NetWork w = {n, bytes};
    return timing_run(cfg, net_rep, &w, st, e);
}

void probe_net_close(ProbeNet *n)
{
    if (!n) return;
    rstore_close(&n->rs);
    free(n->buf);
    free(n);
}
