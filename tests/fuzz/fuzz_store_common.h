/* fuzz_store_common.h — an import into a fresh store and a read-back (fuzz_store_sql.c, fuzz_store_csv.c).
 * Only the public API of sim/cost/store.h. The store is in memory (":memory:"); if store_open ever
 * refuses that name, a per-process temporary file is used. */
#ifndef KV_FUZZ_STORE_COMMON_H
#define KV_FUZZ_STORE_COMMON_H

#include "calibrate/store_io.h"
#include "sim/cost/store.h"
#include "tests/fuzz/fuzz_common.h"

static int fuzz_count_point(void *ctx, const StorePoint *p)
{
    ++*(int64_t *)ctx;
    return 0;
}

static inline void fuzz_store_import(const uint8_t *data, size_t size, int csv)
{
    char *text = fuzz_cstr(data, size);
    CostStore s;
    KvErr e = {{0}};
    if (store_open(&s, ":memory:", 1, &e) != 0) {
        char path[512];
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/kvfuzz-store.%ld.db", dir && *dir ? dir : "/tmp", (long)getpid());
        unlink(path);
        if (store_open(&s, path, 1, &e) != 0) abort();
        unlink(path); /* the open handle keeps it */
    }
    StoreImportStats st;
    memset(&st, 0, sizeof st);
    int rc = csv ? store_import_csv_stats(&s, text, "fuzz", &st, &e) : store_import_sql_stats(&s, text, "fuzz", &st, &e);
    if (rc != 0 && !e.msg[0]) abort();
    if (rc == 0) {
        StoreRunList runs;
        memset(&runs, 0, sizeof runs);
        int64_t total = 0;
        if (store_runs_all(&s, 0, &runs, &e) == 0) {
            for (size_t i = 0; i < runs.n; i++) {
                int64_t n = 0, m = 0;
                if (store_count_points(&s, runs.v[i].id, -1, &n, &e) == 0) total += n;
                if (store_run_points(&s, runs.v[i].id, -1, fuzz_count_point, &m, &e) == 0 && m != n) abort();
            }
            free(runs.v);
            if (total < st.points_added) abort(); /* every imported point is in the store */
        }
        FILE *devnull = fopen("/dev/null", "w");
        if (devnull) {
            (void)store_dump_sql(&s, devnull, &e);
            fclose(devnull);
        }
    }
    store_close(&s);
    free(text);
}

#endif
