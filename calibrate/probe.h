/* probe.h — what kvcal's measured backends can time: a small device interface over the kernels
 * (kernels/cpu.h on the host, kernels/gpu.h on a CUDA device) and the IO probes (host<->device
 * links, SSD reads/writes).
 *
 * Responsible for: opening a backend (CPU: threads and GEMM library; CUDA: device, stream, cuBLAS,
 * event timer, a buffer larger than L2 to evict it), buffers filled with small random values,
 * launching one kernel at a time, timing what was launched (CUDA events on the device,
 * CLOCK_MONOTONIC on the host), and the IO probes with their fallbacks.
 * Not responsible for: which shapes to time, how a cost-model op maps to kernels, repetitions and
 * statistics (calib_run.c and timing.c do that), storing (store.c).
 *
 * Element type: activations and weights are fp32 on the CPU (the CPU kernels compute in fp32
 * whatever the run's dtype label) and fp16/bf16 on CUDA; ProbeDev.elem_bytes says which.
 * Quantized buffers are int8 (one byte per value) with one fp32 scale per row.
 *
 * Error contract: every function returns 0 (or a pointer) on success, -1 (NULL) with a message in
 * the KvErr otherwise; nothing prints or exits. A CUDA backend without a device fails to open with
 * "no CUDA device: <reason>" (also in a build without CUDA). Buffers are released by `release` or,
 * all at once, by `close`.
 * Thread-safety: a ProbeDev is used by one thread at a time.
 */
#ifndef KV_PROBE_H
#define KV_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "sim/catalog/model.h"
#include "sim/base/ops.h"
#include "kernels/ref.h"
#include "calibrate/timing.h"
#include "sim/base/util.h"

typedef struct ProbeDev ProbeDev;

/* How a new buffer is filled (before any timing; never timed). */
typedef enum ProbeFill {
    PROBE_FILL_ELEMS = 0, /* activations/weights: uniform in [-0.05, 0.05] of the element type */
    PROBE_FILL_I8,        /* int8 values in [-127, 127] */
    PROBE_FILL_SCALE,     /* fp32 scales in [0.001, 0.002] */
} ProbeFill;

typedef struct ProbeDevOps {
    /* bytes of device memory filled as said; *buf NULL on failure */
    int (*alloc)(ProbeDev *d, size_t bytes, ProbeFill fill, void **buf, KvErr *e);
    void (*release)(ProbeDev *d, void *buf); /* NULL is fine */
    /* kernels (ref.h layouts); on CUDA asynchronous on the context's stream */
    int (*gemm)(ProbeDev *d, int m, int n, int k, const void *a, const void *b, void *c, KvErr *e);
    int (*attn_prefill)(ProbeDev *d, const void *q, const void *k, const void *v, void *out, int n_new, int n_ctx,
                        int h, int h_kv, int dh, KvErr *e);
    int (*attn_decode)(ProbeDev *d, const void *q, const void *k, const void *v, void *out, int batch,
                       const int *ctx_off_host, int h, int h_kv, int dh, KvErr *e);
    int (*norm)(ProbeDev *d, int layernorm, const void *x, const void *w, const void *b, void *y, int rows, int dim,
                KvErr *e);
    int (*act)(ProbeDev *d, KActKind act, const void *gu, void *out, int rows, int f, KvErr *e);
    int (*rope)(ProbeDev *d, void *x, int n_tokens, int n_heads, int dh, KvErr *e);
    int (*quant)(ProbeDev *d, const void *x, void *q, void *scale, int rows, int group, KvErr *e);
    int (*dequant)(ProbeDev *d, const void *q, const void *scale, void *x, int rows, int group, KvErr *e);
    /* Everything launched between start and stop is timed; stop waits for it and returns ns. */
    int (*timer_start)(ProbeDev *d, KvErr *e);
    int (*timer_stop)(ProbeDev *d, double *ns, KvErr *e);
    /* Untimed: evict the last-level cache (CUDA: write a buffer larger than L2). NULL: no-op. */
    int (*flush_cache)(ProbeDev *d, KvErr *e);
    void (*close)(ProbeDev *d); /* releases every buffer still allocated */
} ProbeDevOps;

struct ProbeDev {
    const ProbeDevOps *ops;
    char backend[16];      /* "cpu" | "cuda" */
    size_t elem_bytes;     /* 4 (cpu fp32) or 2 (cuda fp16/bf16) */
    char device[128];      /* reported device name ("AMD EPYC ...", "NVIDIA H200") */
    char driver[64];       /* CUDA driver version, "" on cpu */
    char cuda[64];         /* CUDA runtime version, "" on cpu */
    char info[256];        /* one line for the run notes (threads, GEMM library, SMs, L2 flush) */
    size_t bytes_in_use;   /* device bytes currently allocated through alloc */
    int cuda_device;       /* index (cuda) */
    void *impl;
};

/* Open the CPU backend: kcpu kernels with OpenBLAS (when built with it), attention threads = online
 * CPUs. Never fails for lack of hardware. */
int probe_cpu_open(ProbeDev *d, KvErr *e);
/* The CPU's last-level cache in bytes: /sys/devices/system/cpu/cpu0/cache/index3/size ("32768K"),
 * else 32 MiB (the fallback when the file is absent or unreadable). */
int64_t probe_cpu_llc_bytes(void);
/* Open the CUDA backend on `device` for fp16 or bf16 (KV_DT_FP16 / KV_DT_BF16). Fails with
 * "no CUDA device: ..." when there is none or the build has no CUDA. */
int probe_cuda_open(ProbeDev *d, int device, KvDtype dtype, KvErr *e);
/* Close either backend (NULL ops is fine: a ProbeDev that never opened). */
void probe_close(ProbeDev *d);

/* ---- cuda replay pieces (probe_cuda.c; kvcal execute --backend cuda, calibrate/execute.c) ----
 * Streams, events and pinned host memory on the device of an open cuda ProbeDev, over kernels/gpu.h
 * (in a build without CUDA each fails with kgpu's "built without CUDA"; a replay never gets here
 * then: probe_cuda_open already failed with "no CUDA device: ..."). Every CUDA error becomes a
 * KvErr message naming the call. A ProbeStream is used by one host thread at a time; events may be
 * recorded on one thread and waited on from another once the record returned. */
typedef struct ProbeStream ProbeStream; /* a CUDA stream: a ProbeDev's compute stream, or one of its own */
typedef struct ProbeEvent ProbeEvent;   /* a timing CUDA event */
/* the compute stream of an open cuda ProbeDev (where its ops run); NULL for any other device */
ProbeStream *probe_cuda_stream(ProbeDev *d);
/* a new non-blocking stream on d's device (for copies beside the compute); close with
 * probe_cuda_stream_close (waits for its work first) */
ProbeStream *probe_cuda_stream_open(ProbeDev *d, KvErr *e);
void probe_cuda_stream_close(ProbeStream *s); /* NULL is fine */
/* make d's device current on the calling thread (each host thread that launches on d calls it) */
int probe_cuda_bind(ProbeDev *d, KvErr *e);
/* an asynchronous copy on s: host (pinned) to device (h2d = 1), or device to device (h2d = 0) */
int probe_cuda_copy(ProbeStream *s, void *dst, const void *src, size_t bytes, int h2d, KvErr *e);
int probe_cuda_sync(ProbeStream *s, KvErr *e); /* the host waits for everything enqueued on s */
ProbeEvent *probe_cuda_event_new(ProbeDev *d, KvErr *e);
void probe_cuda_event_free(ProbeEvent *ev); /* NULL is fine */
int probe_cuda_record(ProbeStream *s, ProbeEvent *ev, KvErr *e);
/* s waits on the device (the host does not) for ev's record as of this call */
int probe_cuda_wait(ProbeStream *s, ProbeEvent *ev, KvErr *e);
int probe_cuda_event_sync(ProbeEvent *ev, KvErr *e); /* the host waits for ev */
/* ns from `from` to `to` (both recorded and completed; event resolution about 0.5 us) */
int probe_cuda_elapsed_ns(ProbeEvent *from, ProbeEvent *to, int64_t *ns, KvErr *e);
/* Pinned host memory of `bytes`, its address a multiple of `align` (a power of two; 4096 for
 * O_DIRECT reads into it): cudaHostAlloc's when that is aligned (it is page-aligned in practice,
 * not by contract), else posix_memalign + cudaHostRegister. */
typedef struct ProbePinned {
    void *p;
    size_t bytes;
    int registered; /* 1: posix_memalign + cudaHostRegister; 0: cudaHostAlloc */
} ProbePinned;
int probe_cuda_pinned_alloc(ProbePinned *b, size_t bytes, size_t align, KvErr *e);
void probe_cuda_pinned_free(ProbePinned *b); /* a zeroed ProbePinned is fine */

/* ---- IO probes (probe_io.c) ---- */

/* Host link: h2d, d2h, h2d_bidir, d2h_bidir of `bytes`.
 *  cuda: pinned host buffers, copies on the device's stream timed with CUDA events; the _bidir ops
 *        time one direction while a copy of max(bytes, 32 MiB) runs the other way on a second
 *        stream (started first). Pageable bandwidth is measured separately (probe_link_pageable).
 *  cpu:  the CPU's device memory is host memory: h2d/d2h are memcpy between two host buffers
 *        timed with CLOCK_MONOTONIC; _bidir runs the other direction's memcpy on a second thread.
 * max_bytes bounds every later measurement. */
typedef struct ProbeLink ProbeLink;
ProbeLink *probe_link_open(int cuda, int device, size_t max_bytes, KvErr *e);
int probe_link_measure(ProbeLink *l, CostOp op, int64_t bytes, const TimingCfg *cfg, TimingStats *st, KvErr *e);
/* Pageable (malloc) H2D and D2H bandwidth at `bytes`, bytes per second (median of a few copies);
 * on cpu the same as the pinned figures (there is no pinning). */
int probe_link_pageable(ProbeLink *l, int64_t bytes, double *h2d_bytes_per_s, double *d2h_bytes_per_s, KvErr *e);
void probe_link_close(ProbeLink *l);

/* SSD: `bytes` read or written with O_DIRECT, striped over `n_files` files (file f in scratch
 * directory f % n_dirs), up to `qd` IOs in flight per file, IO size min(bytes / n_files, 1 MiB)
 * rounded down to 4 KiB (at least 4 KiB), through io_uring when the build has liburing and the
 * kernel allows it, else one thread per in-flight IO. Files are created by open (file_bytes each,
 * written once, untimed; named <dir>/kvcal-ssd-<pid>-<n>.tmp, pid: the process that owns them) and
 * removed by close; those of a process that died without closing (SIGKILL, a crash) are removed by
 * probe_ssd_remove_stale.
 * Fallbacks, each recorded in `note` (never fatal): O_DIRECT refused → buffered IO (writes timed
 * with fdatasync; reads may hit the page cache); a scratch on tmpfs is measured but named as
 * memory. open fails (NULL, message naming the directory and what was expected) when a scratch
 * directory cannot be created or written, or has less free space than needed. */
typedef struct ProbeSsd ProbeSsd;
#define PROBE_SSD_MAX_DIRS 16
#define PROBE_SSD_MAX_IO_BYTES (1 << 20)
ProbeSsd *probe_ssd_open(const char *const *dirs, int n_dirs, int max_files, int64_t file_bytes, KvErr *e);
/* A one-line description of how the probes run (dirs, filesystem, O_DIRECT or buffered, engine). */
const char *probe_ssd_note(const ProbeSsd *s);
int probe_ssd_measure(ProbeSsd *s, CostOp op, int64_t bytes, int qd, int n_files, const TimingCfg *cfg,
                      TimingStats *st, KvErr *e);
void probe_ssd_close(ProbeSsd *s);
/* Use the threads engine even where io_uring works (tests, comparisons); the note says so. */
void probe_ssd_use_threads(ProbeSsd *s);
/* Remove from dir the probe files (kvcal-ssd-<pid>-<n>.tmp, regular files of this user) whose pid is
 * no live process: what a kvcal run killed before its close left. *removed counts them; the names
 * of the first ones go to names (cap bytes, comma-separated). -1 when dir cannot be read. A pid
 * alive in another pid namespace sharing dir looks dead here: give such runs their own scratch. */
int probe_ssd_remove_stale(const char *dir, int *removed, char *names, size_t cap, KvErr *e);

/* The remote store's NIC on this machine (kvcal run --net loopback): a fetch of `bytes` from a
 * server process over TCP on the loopback interface (calibrate/remote_store.h, as kvcal execute
 * replays the remote tier), timed on the host clock from the request to the last byte received.
 * Consecutive repetitions fetch the store's two halves in turn. open: a store of 2 x max_bytes. */
typedef struct ProbeNet ProbeNet;
ProbeNet *probe_net_open(int64_t max_bytes, KvErr *e);
int probe_net_measure(ProbeNet *n, int64_t bytes, const TimingCfg *cfg, TimingStats *st, KvErr *e);
void probe_net_close(ProbeNet *n); /* NULL is fine */

/* The buffers a probe device has handed out (both backends keep such a list). */
typedef struct ProbeBufs {
    void **bufs;
    size_t *sizes;
    int n, cap;
} ProbeBufs;
/* Remember p (bytes long); -1 with a message when out of memory (p is then not recorded). */
int probe_bufs_add(ProbeBufs *b, void *p, size_t bytes, KvErr *e);
/* Forget p; returns 1 and its size when it was recorded, 0 otherwise. */
int probe_bufs_remove(ProbeBufs *b, void *p, size_t *bytes);
/* Free the list itself (not the buffers). */
void probe_bufs_free(ProbeBufs *b);

#endif
