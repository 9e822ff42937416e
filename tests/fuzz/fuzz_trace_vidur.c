/* fuzz_trace_vidur.c — libFuzzer harness: the vidur trace reader (traces/) on arbitrary bytes, read to the
 * end as format "vidur" and again with format detection, max_context and a think time
 * (fuzz_trace_common.h checks what comes out against trace.h's contract). */
#include "tests/fuzz/fuzz_trace_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    fuzz_trace_run("trace_vidur", ".csv", "vidur", data, size);
    return 0;
}
