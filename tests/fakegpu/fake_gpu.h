/* fake_gpu.h — test-only controls of the host stand-in for kernels/gpu.h (tests/fakegpu/fake_gpu.c):
 * its timing (how long a kernel or a copy takes on its worker thread) and its counters (what is
 * still alive, what the caller's stream/event use looked like). Linked only into the stand-in's test
 * binary (make test-fakegpu), never into bin/ or build/kvtest. See fake_gpu.c for what it emulates.
 */
#ifndef KV_TESTS_FAKE_GPU_H
#define KV_TESTS_FAKE_GPU_H

#include <stdint.h>

/* the name kgpu_device_info reports: tests that must tell the stand-in from a GPU look for it */
#define FAKEGPU_DEVICE_NAME "fakegpu (host stand-in)"

/* Durations of the work on a stream (defaults: kernel 20 us; h2d/d2h copies 500 us + 0.5 ns per
 * byte; d2d copies and memsets 2 us + 0.01 ns per byte). Copies from the host are slower than a
 * whole layer's kernels on purpose: a stream that fails to wait for a copy runs ahead of it and the
 * replay's device-side dependency check sees it. A negative value keeps the current one. Call it
 * while no stream has work (between tests). */
void fakegpu_set_timing(int64_t kernel_ns, int64_t h2d_fixed_ns, double h2d_ns_per_byte);

typedef struct FakegpuStats {
    long ctx_live;          /* contexts (streams) not yet destroyed */
    long events_live;       /* events not yet destroyed */
    long dev_allocs_live;   /* kgpu_malloc'd buffers not yet freed */
    long pinned_live;       /* kgpu_host_alloc(pinned) buffers + registered ranges not yet released */
    long ops;               /* operations enqueued on streams */
    long records, waits;    /* kgpu_event_record / kgpu_stream_wait_event calls */
    long waits_unrecorded;  /* stream waits on a never-recorded event (CUDA: no wait at all) */
    long destroyed_pending; /* events destroyed while their last record was not complete (legal) */
    long h2d_async;         /* h2d copies from page-locked memory (asynchronous to the host) */
    long h2d_unawaited;     /* of those: completed with no other stream waiting on, and no host
                             * cudaEventSynchronize of, an event recorded after them on their
                             * stream before the stream was synchronised or destroyed */
    long misuse;            /* calls CUDA would refuse (see fake_gpu.c), each also an error return */
} FakegpuStats;

void fakegpu_stats(FakegpuStats *s);

#endif
