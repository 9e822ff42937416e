/* fuzz_store_sql.c — libFuzzer harness: importing a SQL dump (store_import_sql_stats, sim/cost/store.h)
 * into a fresh in-memory store, then reading back what was imported (runs, points, a dump). */
#include "calibrate/store_io.h"
#include "sim/cost/store.h"
#include "tests/fuzz/fuzz_store_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_store_import(data, size, 0);
    return 0;
}
