/* fuzz_common.h — helpers shared by the libFuzzer harnesses in tests/fuzz/ (not part of the library).
 *
 * Responsible for: turning the fuzzer's bytes into what a reader takes — a NUL-terminated copy, or a
 * temporary file (one per process, rewritten on every input) for readers that take a path.
 * Not responsible for: judging results; a harness only requires that a reader returns (success or a
 * clean error with a message) without a sanitizer report, leak, hang or abort.
 * Invariants: the temporary file lives in $TMPDIR (or /tmp), is named after the harness and the pid,
 * and is removed at exit.
 */
#ifndef KV_FUZZ_COMMON_H
#define KV_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* data as a C string (bytes after an embedded NUL are invisible to the reader, as in a file read by
 * kv_read_file); free() it. */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = '\0';
    return s;
}

static char fuzz_path_buf[512];
static void fuzz_unlink_at_exit(void) { unlink(fuzz_path_buf); }

/* data written to this process's temporary file NAME.PID.SUFFIX; returns its path (static). */
static inline const char *fuzz_file(const char *name, const char *suffix, const uint8_t *data, size_t size)
{
    if (!fuzz_path_buf[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(fuzz_path_buf, sizeof fuzz_path_buf, "%s/kvfuzz-%s.%ld%s", dir && *dir ? dir : "/tmp", name,
                 (long)getpid(), suffix);
        atexit(fuzz_unlink_at_exit);
    }
    FILE *f = fopen(fuzz_path_buf, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    if (fclose(f) != 0) abort();
    return fuzz_path_buf;
}

#endif
