/* execute_int.h — kvcal execute's internals, shared by its files (calibrate/execute*.c): the
 * replay's state (Ex: files, units, iterations, stages, IO queues, the race), and the functions one
 * file calls in another. Private to those files; the API is execute.h. */
#ifndef KV_EXECUTE_INT_H
#define KV_EXECUTE_INT_H

#include "calibrate/execute.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "calibrate/probe.h"
#include "calibrate/remote_store.h"
#include "sim/engine/batch.h"

#define EX_ALIGN 4096
#define EX_IO_BYTES (1 << 20)

typedef struct ExFile {
    char name[64];
    int tier;
    int64_t bytes;
    int64_t rbase; /* remote tier: where the file starts in the remote store */
    char path[4200];
    int fd;
    unsigned char *host; /* dram tier: the state in host memory (cuda: pinned, in pin) */
    ProbePinned pin;
} ExFile;

typedef struct ExHopRef {
    int u, h;          /* replayed unit index, hop */
    int64_t pred_start;
} ExHopRef;

typedef struct ExWeights {
    void *qkv, *o, *up, *down, *kv;
} ExWeights;

#define EX_WEIGHT_CAP_BYTES ((int64_t)1 << 30) /* all layers' weights beyond this: sets reused */

/* IO queues: the ssd (shared, as the engine's CH_SSD), then each stage's own h2d (CH_H2D is one
 * per stage: each stage's GPUs have their own link), then the NICs to the remote store (CH_NIC_IN:
 * one, or one per stage with the header's nic_per_stage), each its own connection to it */
#define EX_Q_SSD 0
#define EX_Q_H2D(st) (1 + (st))
#define EX_Q_NIC(k) (1 + SCH_MAX_STAGES + (k))
#define EX_NQ (1 + 2 * SCH_MAX_STAGES)

typedef struct Ex Ex;

/* one pipeline stage's compute: its thread's activation buffers (a stage's lanes run while the
 * stage before it computes: separate buffers) and its "device" buffer, where its h2d copies land */
typedef struct ExStage {
    Ex *x;
    int st;
    int cpu; /* the CPU it is pinned to, -1: not pinned */
    ProbeDev *dev;     /* its kernels: cpu: the shared x->dev; cuda: stage 0 x->dev, stage st > 0 its own (own) */
    ProbeDev own;
    int own_open;
    ProbeStream *cs;   /* cuda: dev's compute stream */
    ProbeStream *copy; /* cuda: the stage's h2d stream (its own), where its units' copies land */
    void *x_, *xn, *qkv, *q_, *k, *v, *ao, *h, *gu, *a, *kvp, *qi8, *scale;
    int *ctx_off;
    unsigned char *dev_buf; /* cpu: malloc'd; cuda: device memory of dev (released with it) */
} ExStage;

struct Ex {
    const Schedule *s;
    ExecResult *r;
    ProbeDev dev;
    int dev_open;
    ExFile *files;
    int n_files;
    int o_direct;
    /* per replayed unit */
    int *u_file;
    unsigned char **staging;
    int64_t *u_start, *u_len; /* aligned read range */
    int64_t (*hop_end)[SCH_MAX_HOPS], (*hop_start)[SCH_MAX_HOPS];
    int64_t *u_done;          /* landing time (-1: not yet) */
    int64_t *it_done;         /* per replayed iteration */
    int64_t *it_start;
    /* per replayed iteration × layer */
    int64_t *ly_end;          /* the end of its restoration work */
    int64_t *ly_done;         /* the end of the layer (-1: not yet) */
    /* per replayed lane (lane_off[k] + j: lane j of replayed iteration k) */
    int *lane_off;
    int64_t *lane_start, *lane_end;
    int *unit_of_id, *iter_of_id; /* schedule id − 1 → replayed index (-1: not replayed) */
    int64_t dev_bytes;
    ExHopRef *q[EX_NQ];
    int nq[EX_NQ];
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t t0;
    int failed, pin, io_cpu;
    int spin; /* stage threads wait spinning (ExecWait), not asleep on cv */
    double io_rate;        /* ExecOptions.io_rate: bytes per second an ssd hop takes at most (0: unlimited) */
    double net_rate;       /* ExecOptions.net_rate: the same for a nic hop (0: the loopback's own speed) */
    int64_t net_lat_ns;    /* ExecOptions.net_latency_ns: and at least this long */
    RemoteStore rstore;    /* the remote tier's server processes (rstore.n: connections, 0 when no remote unit) */
    int n_nics;            /* NIC queues (and connections): 1, or the stages with nic_per_stage */
    struct ExRace *race;   /* ExecOptions.race: the race's state */
    KvErr err;
    ExStage stage[SCH_MAX_STAGES];
    void *nw, *nb; /* norm weights (read only, shared) */
    /* the projection weights of each layer (a real model's layers have their own: a small model's
     * one set would sit in the CPU's caches); layer l uses set l % n_wsets; read only, shared */
    ExWeights *ws;
    int n_wsets;
    int64_t max_rows, max_kv, max_batch, max_work_tok;
    int64_t kv_rows; /* rows of one layer's K (and V) region: the most one iteration's items, work and lanes
                      * hold at once (each its own rows; every layer its own region, as a model's cache) */
    /* cuda only */
    int cuda;
    ProbePinned stage_pin; /* every ssd unit's staging buffer: one pinned allocation, each 4 KiB aligned */
    ProbeEvent *ev0;       /* the replay's start: recorded and waited for right before t0 */
    ProbeEvent **u_ev;     /* per replayed unit: its landing (recorded on its stage's copy stream after the copy) */
    ProbeEvent **ly_ev;    /* per replayed iteration × layer, 3 each: start (after its waits), restoration work end, end */
    ProbeEvent **lane_ev;  /* per lane, 2 each: start, end */
    int *u_issued;         /* the unit's landing copy enqueued and u_ev recorded (this replay) */
    int *ly_issued;        /* the layer enqueued and its end event recorded (this replay) */
    int64_t *ly_start;     /* per iteration × layer: its start on the device */
};

#define RACE_MAX_DEPTH 8

/* one raced request (execute.h "Race"): its token-wise file, kvsim's rules, its pointers and its
 * progress (under x->mu) */
typedef struct ExRaceReq {
    const SchReq *q;
    int file;         /* its token-wise state file (x->files; -1: no history) */
    int64_t bpt;      /* bytes per token, every layer */
    int64_t N, io_chunk, depth, comp_chunk; /* comp_chunk 0: as much as the budgets allow */
    int low;          /* its restoration compute is low-priority (after every new input: Cake) */
    /* under mu */
    int admitted, tw; /* tw: restoring (its two pointers have not met, or a claimed chunk is in flight) */
    int64_t io_issued, comp, comp_inflight, landed, n_flight;
    int64_t restored, first, new_done, out_done; /* replay times (-1: not yet), tokens */
} ExRaceReq;

/* a race's state: the requests in admission order, the budgets, the IO side's claims of every
 * request in claim order (the one channel serves them first come, first served) */
typedef struct ExRace {
    ExRaceReq *rq;
    int n;
    int64_t token_budget, rbudget; /* per iteration: every item's tokens, the restoration compute's */
    int oldest;       /* the IO side serves the oldest request's claim first (header io_order "oldest"), else in claim order */
    unsigned char *buf; /* the IO side's read buffer: the largest chunk, 4 KiB aligned at both ends */
    /* under mu */
    int *qreq;
    int64_t *qlo, *qhi; /* claimed, not yet begun by the IO thread (FIFO of qcap) */
    int qhead, qn, qcap, done;
    ExecChunk *log;
    int n_log, cap_log;
} ExRace;

#define EX_EV_START 0
#define EX_EV_WORK 1
#define EX_EV_END 2
/* event timestamps have about 0.5 us resolution: the device-side dependency check allows this much */
#define EX_CUDA_TOL_NS 1000
#define EX_CUDA_DEVICE 0 /* the device every stage runs on (CUDA_VISIBLE_DEVICES picks another) */

/* an IO thread's argument (execute_io.c ex_chan_main) */
typedef struct ChanArg {
    Ex *x;
    int q; /* EX_Q_SSD, EX_Q_H2D(stage) or EX_Q_NIC(k) */
} ChanArg;

/* ---- execute.c */
int64_t ex_mono_ns(void);
int64_t ex_now(const Ex *x);
int64_t ex_rel(const Ex *x, int64_t sim_ns);
void ex_fail_locked(Ex *x, const KvErr *e);
void ex_fail(Ex *x, KvErr *e);
void ex_resolve_landing(Ex *x, int k);
int ex_cause_ok(const Ex *x, const SchCause *c, int64_t *at, int *resolve);
void ex_wait_until_time(Ex *x, int64_t at);
void ex_io_throttle(const Ex *x, int64_t t, int64_t bytes, double rate, int64_t lat);
int ex_replay(Ex *x, KvErr *e);

/* ---- execute_io.c */
int ex_pread_all(const ExFile *f, unsigned char *dst, int64_t off, int64_t left, KvErr *e);
int ex_pin_to(int cpu);
void *ex_chan_main(void *p);

/* ---- execute_compute.c */
int ex_layer_run(Ex *x, ExStage *g, const SchItem *items, int nitems, const SchLayer *ly, int l, int64_t *work_end,
                 ProbeEvent *work_ev, KvErr *e);
int64_t ex_layer_rows(const SchIter *it, int l);
int ex_compute_alloc(Ex *x, KvErr *e);

/* ---- execute_prep.c */
void ex_cuda_teardown(Ex *x);
int ex_prepare(Ex *x, const ExecOptions *o, KvErr *e);
void ex_drop_caches(Ex *x);

/* ---- execute_race.c */
int race_setup(Ex *x, KvErr *e);
void race_free(Ex *x);
int race_run(Ex *x, const ExecOptions *o, int reps, KvErr *e);

/* ---- execute_results.c */
int exec_run_one(const Schedule *s, const ExecOptions *o, ExecResult *r, KvErr *e);

#endif
