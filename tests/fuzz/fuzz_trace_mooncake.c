/* fuzz_trace_mooncake.c — libFuzzer harness: the mooncake trace reader (traces/) on arbitrary bytes, read to the
 * end as format "mooncake" and again with format detection, max_context and a think time
 * (fuzz_trace_common.h checks what comes out against trace.h's contract). */
#include "tests/fuzz/fuzz_trace_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_trace_run("trace_mooncake", ".jsonl", "mooncake", data, size);
    return 0;
}
