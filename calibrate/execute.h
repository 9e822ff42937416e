/* execute.h — kvcal execute: replay a kvsim schedule (calibrate/schedule.h) on this machine with
 * real kernels and real file reads, and measure every unit, layer, iteration and request.
 *
 * Responsible for:
 *  - the replayed part: the requests released at or after the origin (the first release of a
 *    request with history: the turn that restores; everything before — the turns that built the
 *    history — is not replayed) and the units and iterations issued or started from then on;
 *  - the saved state, written beforehand: every file the replayed loads read (schedule_out.c's
 *    layout), random bytes, written and synced before timing; tier "ssd" read with O_DIRECT (pread,
 *    4 KiB aligned, at most 1 MiB per call; buffered after posix_fadvise(DONTNEED) where the file
 *    system refuses O_DIRECT, said in the note), tier "dram" copied from a host buffer;
 *  - one thread per IO channel — the ssd (shared by the stages) and each pipeline stage's own h2d
 *    (the engine's channel table: CH_H2D is one per stage) — serving its hops in the schedule's order
 *    on that channel (the engine's own choice), a hop starting once its unit is ready (its "after"
 *    cause: a unit landed, an iteration ended, or an instant, mapped to wall time from the origin)
 *    and its previous hop ended; ssd: the read into the unit's staging buffer; h2d: memcpy into the
 *    "device" buffer of the unit's stage;
 *  - the compute (the ProbeDev's cpu kernels), one thread per pipeline stage (one stage: the calling
 *    thread; several: stage st's thread pinned to CPU st when pinning, each stage its own activation
 *    buffers; weights shared, read only): iterations in order, stage 0 starting each once the
 *    previous one ended and its "after" cause and after_units happened; its overhead spun; then,
 *    as walk.c runs an iteration, on stage st's thread: first st's stage-parallel lanes (the
 *    schedule's `lanes` of stage st, in the file's order: item order, then layer), each once its
 *    boundary activation landed (stage st > 0: the units of the stage's first layer that belong to
 *    the lane's request; stage 0 recomputes from the tokens), each a prefill of the lane's history
 *    tokens over its layer; then st's layers, layer l once layer l − 1 of the same iteration ended
 *    (on whichever stage) and the units it waits for landed; at a stage's first layer the
 *    activations of the stage before are copied from its buffers (the pipeline's hand-off; the
 *    engine costs none, a few tens of µs here). Per layer: first the layer's restoration work
 *    (projections: kv_proj GEMM + RoPE on K; dequantizations), then the norms, the QKV GEMM over
 *    the batch's rows plus layer-wise recompute rows, RoPE, prefill attention per prefill/recompute
 *    item and per recompute work, decode attention of the decode items (one call), O GEMM, FFN up
 *    GEMM, gated activation, FFN down GEMM — the ops and the order sim/cost/layer_cost and
 *    iteration.c cost;
 *  - repetitions: the whole replay `reps` times; per request, iteration, unit and lane the median,
 *    or the least (stat = EXEC_STAT_MIN: the undisturbed time on a shared machine, where other jobs
 *    only add).
 *
 * Backend cuda (backend "cuda"; written and checked without a GPU, against a host emulation of the
 * CUDA stream/event semantics — tests/fakegpu/fake_gpu.c, make test-fakegpu — not yet run on a
 * device: make gpu-check does):
 *  - device 0 (CUDA_VISIBLE_DEVICES picks another), fp16 (elem_bytes 2: every activation, weight and
 *    KV byte count), the kernels of kernels/gpu.h through a ProbeDev per stage — each its own stream
 *    and cuBLAS handle (probe_cuda_open); stage 0's also holds the weights and norm weights the
 *    stages share (one device: every stream reads them) — plus per stage an h2d copy stream of its
 *    own (probe_cuda_stream_open), never the compute stream;
 *  - the host side as on cpu (the same threads, one mutex + condvar, the schedule's order per
 *    channel): ssd hops are O_DIRECT preads into pinned staging (one cudaHostAlloc allocation cut at
 *    4 KiB multiples, 4 KiB aligned — else posix_memalign + cudaHostRegister, probe.h); the DRAM tier
 *    is pinned host memory; an h2d hop is cudaMemcpyAsync on the unit's stage's copy stream into that
 *    stage's device landing buffer, followed by cudaEventRecord of the unit's landing event;
 *  - the stream scheme (device-side waits): a stage's thread waits on the host only until what a
 *    lane or layer needs has been *enqueued* (its units' copies and landing events; for a stage's
 *    first layer, the stage before's last layer of the iteration and its end event), then
 *    cudaStreamWaitEvent on those events (the GPU waits, not the host), records a start event,
 *    copies the stage before's activations device to device (the hand-off), enqueues the layer
 *    (an event after its restoration work) and an end event. Lanes likewise, between two events;
 *  - where the host must decide on a device time it waits for that event (cudaEventSynchronize):
 *    at the end of each iteration (its last layer's end event, on the last stage's thread: the next
 *    iteration starts after it — as a serving engine waits for the sampled tokens — and "after"
 *    causes name iterations), and for a unit's landing named by an "after" cause or an iteration's
 *    after_units (whichever thread waits for it). Iteration starts, overheads and SSD read times
 *    are host clock;
 *  - times: before each replay every stream is drained, a start event is recorded on stage 0's
 *    stream and waited for, then the host clock's t0 is read; after the replay (every stream
 *    drained) each event's time is cudaEventElapsedTime from that start event (float ms: about
 *    0.5 us resolution; the start event precedes t0 by the wait's return, a few us);
 *  - deps_ok on cuda: the host half — every unit a layer or lane waits for was enqueued (or landed)
 *    before the stream wait was issued (by construction; checked); the device half, after each
 *    replay from the events — each layer's start event (recorded after its stream waits) is no
 *    earlier than the landing event of every unit it waits for and than the end event of the layer
 *    before it, each lane of a stage st > 0 no earlier than its boundary activation's landing,
 *    within 1 us (the events' resolution). stage_ok and cpu_ok keep their meaning for the thread
 *    that enqueued each layer. The IO threads are not pinned on cuda (they only read and enqueue);
 *  - biases: the kernels' own host synchronisations (a decode batch whose offsets changed since the
 *    previous call uploads them after a stream sync: once per iteration with decode items; the
 *    attention workspace grows with a sync, in the warm-up replay), the hand-off copy (the engine
 *    costs none, a few us here), and several stages sharing one GPU's SMs (the engine gives each
 *    stage its own GPU): validate.sh BACKEND=cuda replays one stage by default.
 * Several replicas: each is a machine of its own (its GPUs, link and SSD; kvsim's router chose its
 *   requests), so each replica's part — its requests, the units that load for them, its iterations,
 *   renumbered, every reference mapped — is replayed on its own, one after another, and the results
 *   put side by side in the schedule's frame (each part's origin is its own first restoring release);
 *   a part that waits for another replica's unit or iteration is refused, naming it.
 * Race (ExecOptions.race, kvcal execute --race; cpu, one stage; one restoring request alone or a
 *   batch of them): the token-wise two pointers (Cake; CacheFlow token-wise) run by kvsim's own
 *   rules on measured time instead of following the schedule's chunks — each request's IO side keeps
 *   io_depth chunks of io_chunk tokens claimed backward from the end (each read from the request's
 *   token-wise file, or fetched from the remote store, then copied), every request's claims served
 *   by one IO thread in the order the header's io_order names: "fifo" claim order (the engine's
 *   channel without a policy pick), "oldest" the smallest request id's claim first, ties in claim
 *   order (CacheFlow's batch-aware scheduler, policy.h io_order);
 *   the compute runs iterations formed by the engine's own batching rule (sim/engine/batch.c
 *   batch_form, which iteration.c calls too) from the requests' state at run time: decode tokens first, then in admission order new input and restoration compute (a
 *   low-priority request's after every new input), at most the header's token_budget tokens and
 *   comp_budget of restoration compute per iteration, a compute chunk every unclaimed token of its
 *   request up to those (comp_chunk when smaller) recomputed forward over the tokens before it; the
 *   IO side claims at admission and again after each landing and each compute chunk (restore.c
 *   restore_tw_issue); a request is restored once every token is computed or landed and nothing is
 *   in flight, then its new tokens are prefilled over its whole history, and its decode tokens join
 *   the later iterations until every request has its first token. Measured per request: TTFT,
 *   restore time and the meet (tokens computed forward), against the schedule's; the chunks of the
 *   last replay. One IO thread does a chunk's read and then its copy (the engine's ssd and h2d
 *   channels overlap one chunk's copy with the next one's read: a copy is ~1 % of a read here).
 *   A batch whose io_order is another ("policy": cacheflow.io_order mrf, edf, aging) is refused; so
 *   is one from a schedule without token_budget, io_order or the requests' low_prio (an older kvsim).
 * Remote tier: the remote store is a process of this machine (calibrate/remote_store.h: server
 *   processes holding the remote files' bytes in their memory, serving byte ranges over TCP on the
 *   loopback interface), one connection per NIC of the schedule (one, or one per stage with the
 *   header's nic_per_stage); a nic hop is a fetch of the unit's bytes over its NIC's connection into
 *   the unit's staging buffer (a thread per NIC, as the ssd's), paced to net_rate and
 *   net_latency_ns when given; the h2d hop then copies from there. The race fetches its chunks over
 *   the one NIC the same way.
 * Not responsible for: saves and spills (not in the schedule), the comparison across cases
 *   (tools/validate.sh), printing (calibrate/cli/execute_cmd.c).
 * Invariants: a layer never starts before every unit it waits for has landed nor before the layer
 *   before it ended, a lane never before its boundary activation landed, nor an iteration before
 *   its causes (checked after each replay: deps_ok); each layer runs on its stage's thread
 *   (stage_ok); files are removed on return; cuda: every stream is drained before its events, the
 *   pinned memory its copies read and the device buffers are released, on every path.
 * Complexity: O(reps × (units + iterations × layers + lanes)) kernel calls and reads; memory: the
 *   staging buffers of the replayed units + per stage the largest layer's (or lane's) activations;
 *   cuda: 3 events per iteration × layer, 2 per lane, 1 per unit, created once.
 */
#ifndef KV_EXECUTE_H
#define KV_EXECUTE_H

#include <stdint.h>
#include <stdio.h>

#include "calibrate/schedule.h"
#include "sim/base/util.h"

typedef struct ExecOptions {
    const char *backend;     /* "cpu" (default) or "cuda" (anything else is refused naming both) */
    const char *scratch_dir; /* where the state files go (NULL/"": $TMPDIR or /tmp) */
    int reps;                /* replays (median); 0: 3 */
    int pin;                 /* pin: several stages: stage st on CPU st, the IO threads on the last CPU when
                              * it is free of stages; one stage: the IO threads on the last CPU (2+ CPUs) */
    int stat;                /* ExecStat: what summarises the replays */
    int wait;                /* ExecWait: how a stage thread waits for its inputs */
    int race;                /* the token-wise two pointers raced at run time (execute.h "Race") instead of the
                              * schedule's chunks */
    double io_rate;          /* > 0: every ssd hop takes at least its bytes / io_rate seconds (an emulated drive
                              * or network of that bandwidth, as Cake's evaluation emulates IO: bytes /
                              * bandwidth); 0: the drive's own speed */
    double net_rate;         /* > 0: every nic hop (a remote-tier unit fetched from the remote store) takes at
                              * least net_latency_ns + bytes / net_rate seconds (an emulated network); 0: */
    int64_t net_latency_ns;  /* the loopback's own speed (execute.h "Remote tier") */
} ExecOptions;

typedef enum ExecStat { EXEC_STAT_MEDIAN = 0, EXEC_STAT_MIN = 1 } ExecStat;
/* AUTO: SPIN for the cpu stage threads of a replay of several stages, SLEEP otherwise; SPIN: a
 * waiting stage thread releases the lock, yields its CPU and checks again (its core never idles,
 * as a GPU stays ready); SLEEP: it sleeps on the replay's condition variable */
typedef enum ExecWait { EXEC_WAIT_AUTO = 0, EXEC_WAIT_SLEEP = 1, EXEC_WAIT_SPIN = 2 } ExecWait;

/* Measured times of one replay, in the schedule's time frame (origin_ns + wall time since the start). */
typedef struct ExecReq {
    uint64_t id;
    int64_t release_ns, restored_ns, first_ns, ttft_ns, restore_ns;
    double meet;     /* a race: its tokens computed forward when its pointers met (median over the replays) */
} ExecReq;

/* one chunk of a race (ExecOptions.race): claimed by the IO side (loaded backward) or the compute
 * side (recomputed forward), its tokens [lo, hi) and its times (ns since the replay's start) */
typedef struct ExecChunk {
    int io;
    int64_t lo, hi, start_ns, end_ns;
    uint64_t req;    /* the request whose history it is */
} ExecChunk;

typedef struct ExecResult {
    int64_t origin_ns;
    int n_reqs, n_units, n_iters;  /* replayed */
    int *unit_idx, *iter_idx, *req_idx; /* indices into the schedule's arrays */
    ExecReq *reqs;                 /* medians (or least: stat) over the replays */
    double *iter_ns;               /* measured duration of each replayed iteration (median) */
    double *iter_start_ns;         /* measured start (median) */
    double *unit_end_ns;           /* measured landing of each replayed unit (median) */
    int stages;                    /* the schedule's pipeline stages (one compute thread each) */
    int n_lanes;                   /* stage-parallel lanes replayed (per replay) */
    double *lane_ns;               /* measured duration of each lane (replayed iterations' lanes in order) */
    double *lane_end_ns;           /* measured end of each lane */
    int *layer_stage;              /* per replayed iteration × layer: the stage whose thread ran it (last replay) */
    int *layer_cpu;                /* per replayed iteration × layer: the CPU it ended on (sched_getcpu, last replay) */
    int deps_ok;                   /* every replay respected every dependency */
    int stage_ok;                  /* every layer ran on its stage's thread, in every replay */
    int cpu_ok;                    /* pinned stages: every layer ended on its stage's CPU */
    int reps;
    int stat;                      /* ExecStat of the summaries */
    char note[640];                /* the IO path, the kernels, pinning (cuda: the device, the stream scheme, pinned h2d) */
    char deps_why[192];            /* cuda, deps_ok 0: the first broken dependency found, with its margin ("" otherwise) */
    /* a race (ExecOptions.race): the tokens computed forward when the pointers met (summary over the
     * replays, and each replay's), the last replay's chunks in claim order; iterations and units: none */
    int race;
    double race_meet;              /* the first restoring request's meet (reqs[k].meet: each one's) */
    int64_t *race_meets;           /* replay p, request k: race_meets[p * race_n + k] */
    int race_n;                    /* the raced requests (n_reqs) */
    ExecChunk *chunks;
    int n_chunks;
    double io_rate;
} ExecResult;

int exec_run(const Schedule *s, const ExecOptions *o, ExecResult *r, KvErr *e);
/* The summary of n (>= 1) replays' values: their median, or their least (stat EXEC_STAT_MIN); sorts v. */
double exec_summary_ns(int64_t *v, int n, int stat);
/* The result with the schedule's predictions next to it, as JSON (docs/validation.md). */
int exec_write_json(FILE *f, const Schedule *s, const ExecResult *r, const char *schedule_path);
void exec_result_free(ExecResult *r);

#endif
