/* fuzz_store_csv.c — libFuzzer harness: importing a cost CSV (store_import_csv_stats, sim/cost/store.h)
 * into a fresh in-memory store, then reading back what was imported (runs, points, a dump). */
#include "calibrate/store_io.h"
#include "sim/cost/store.h"
#include "tests/fuzz/fuzz_store_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_store_import(data, size, 1);
    return 0;
}
