/* test_remote_store.c — the remote store on the loopback interface (calibrate/remote_store.c), its
 * NIC probe (probe_io.c ProbeNet) and a calibration of net points (kvcal run --net loopback). */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calibrate/calib_plan.h"
#include "calibrate/calib_run.h"
#include "calibrate/probe.h"
#include "calibrate/remote_store.h"
#include "sim/catalog/model.h"
#include "sim/cost/store.h"
#include "tests/harness.h"

/* two connections serve the same store: the same range reads the same bytes on either and again;
 * another range other bytes; a range outside refused before anything is sent (the connection still
 * serves); close reaps both servers */
TEST(remote_store_serves_ranges_and_reaps_its_servers)
{
    RemoteStore rs;
    KvErr e;
    CHECK_MSG(rstore_open(&rs, 1 << 20, 2, &e) == 0, "%s", e.msg);
    if (t->failures) return;
    unsigned char *a = malloc(65536), *b = malloc(65536), *c = malloc(65536);
    CHECK(a && b && c);
    if (a && b && c) {
        CHECK_MSG(rstore_fetch(&rs, 0, 4096, 65536, a, &e) == 0, "%s", e.msg);
        CHECK_MSG(rstore_fetch(&rs, 1, 4096, 65536, b, &e) == 0, "%s", e.msg);
        CHECK(memcmp(a, b, 65536) == 0);
        CHECK_MSG(rstore_fetch(&rs, 0, 4096, 65536, c, &e) == 0, "%s", e.msg);
        CHECK(memcmp(a, c, 65536) == 0);
        CHECK_MSG(rstore_fetch(&rs, 0, 8192, 65536, c, &e) == 0, "%s", e.msg);
        CHECK(memcmp(a, c, 65536) != 0);
        CHECK(memcmp(a + 4096, c, 65536 - 4096) == 0); /* the store's bytes, shifted by 4 KiB */
        CHECK(rstore_fetch(&rs, 0, (1 << 20) - 100, 101, c, &e) != 0);
        CHECK_CONTAINS(e.msg, "a fetch of 101 bytes at 1048476: outside its 1048576 bytes");
        CHECK(rstore_fetch(&rs, 2, 0, 1, c, &e) != 0);
        CHECK_CONTAINS(e.msg, "connection 2: expected 0..1");
        CHECK_MSG(rstore_fetch(&rs, 0, (1 << 20) - 100, 100, c, &e) == 0, "%s", e.msg); /* still served */
    }
    pid_t p0 = rs.pid[0], p1 = rs.pid[1];
    CHECK(p0 > 0 && p1 > 0 && p0 != p1);
    rstore_close(&rs);
    CHECK(kill(p0, 0) != 0 && errno == ESRCH); /* reaped: no zombie left */
    CHECK(kill(p1, 0) != 0 && errno == ESRCH);
    rstore_close(&rs); /* twice is fine */
    CHECK(rstore_fetch(&rs, 0, 0, 1, a ? a : (unsigned char *)&e, &e) != 0);
    free(a);
    free(b);
    free(c);
    CHECK(rstore_open(&rs, 0, 1, &e) != 0);
    CHECK_CONTAINS(e.msg, "0 bytes: expected > 0");
    CHECK(rstore_open(&rs, 4096, RSTORE_MAX_CONN + 1, &e) != 0);
    CHECK_CONTAINS(e.msg, "17 connections: expected 1..16");
}

/* a server that dies is reported by the next fetch, naming the connection, not a hang or SIGPIPE */
TEST(remote_store_reports_a_dead_server)
{
    RemoteStore rs;
    KvErr e;
    CHECK_MSG(rstore_open(&rs, 1 << 16, 1, &e) == 0, "%s", e.msg);
    if (t->failures) return;
    CHECK(kill(rs.pid[0], SIGKILL) == 0);
    waitpid(rs.pid[0], NULL, 0);
    rs.pid[0] = 0;
    unsigned char buf[4096];
    CHECK(rstore_fetch(&rs, 0, 0, sizeof buf, buf, &e) != 0);
    CHECK_MSG(strstr(e.msg, "remote store: connection 0:"), "got '%s'", e.msg);
    rstore_close(&rs);
}

/* the NIC probe: a fetch of each size timed (positive, finite: two timings keep no order on a loaded
 * machine); a fetch beyond what it was opened for refused */
TEST(probe_net_times_fetches)
{
    KvErr e;
    ProbeNet *n = probe_net_open(1 << 20, &e);
    CHECK_MSG(n, "%s", e.msg);
    if (!n) return;
    TimingCfg cfg = {.warmup = 1, .min_reps = 5, .max_reps = 5};
    TimingStats small, big;
    CHECK_MSG(probe_net_measure(n, 4096, &cfg, &small, &e) == 0, "%s", e.msg);
    CHECK_MSG(probe_net_measure(n, 1 << 20, &cfg, &big, &e) == 0, "%s", e.msg);
    CHECK_MSG(small.n == 5 && big.n == 5 && small.median_ns > 0 && isfinite(small.median_ns) && big.median_ns > 0 && isfinite(big.median_ns),
              "4 KiB %g ns (n %d), 1 MiB %g ns (n %d)", small.median_ns, small.n, big.median_ns, big.n);
    CHECK(probe_net_measure(n, (1 << 20) + 1, &cfg, &small, &e) != 0);
    CHECK_CONTAINS(e.msg, "expected 1..1048576");
    probe_net_close(n);
    probe_net_close(NULL);
}

/* a calibration of the net points alone (kvcal run --net loopback's plan): every size stored, the
 * notes say how they were timed, the points stored by size, each time positive and finite */
TEST(calib_net_points_on_the_loopback)
{
    ModelCatalog mc;
    KvErr e;
    if (model_catalog_load(&mc, NULL, &e) != 0) {
        CHECK_MSG(0, "models: %s", e.msg);
        return;
    }
    const ModelSpec *m = model_find(&mc, "Tiny-Llama-V", &e);
    CHECK(m);
    CalibPlan plan;
    calib_plan_clear(&plan);
    CHECK_MSG(calib_plan_add_net(&plan, &e) == 0, "%s", e.msg);
    CHECK_EQ_I(calib_plan_points(&plan), 6);
    char db[4200];
    snprintf(db, sizeof db, "%s/net.db", test_tmpdir(t));
    CostStore st;
    CHECK_MSG(store_open(&st, db, 1, &e) == 0, "%s", e.msg);
    CalibOptions o = {.backend = "cpu", .model = m, .dtype = KV_DT_FP16, .tp = 1, .plan = &plan};
    CalibResult r;
    CHECK_MSG(m && calib_run(&st, &o, &r, &e) == 0, "calib_run: %s", e.msg);
    if (!t->failures) {
        CHECK_EQ_I(r.points, 6);
        CHECK_CONTAINS(r.meta.notes, "net = a fetch from a server process over TCP on the loopback interface");
        CHECK(!strstr(r.meta.notes, "not measured: allreduce, allgather, net"));
    }
    StorePointList pl = {0};
    CHECK_MSG(store_points_all(&st, r.run_id, OP_NET, &pl, &e) == 0, "%s", e.msg);
    CHECK_EQ_I((int)pl.n, 6);
    for (size_t k = 0; k < pl.n; k++) /* stored by size: 64 KiB .. 1 MiB, 16 MiB */
        CHECK_MSG((k == 0 || pl.v[k].p1 > pl.v[k - 1].p1) && pl.v[k].median_ns > 0 && isfinite(pl.v[k].median_ns),
                  "point %zu: %lld bytes, %g ns", k, (long long)pl.v[k].p1, pl.v[k].median_ns);
    if (pl.n == 6) CHECK(pl.v[0].p1 == 64 << 10 && pl.v[5].p1 == 16 << 20);
    free(pl.v);
    store_close(&st);
    model_catalog_free(&mc);
}
