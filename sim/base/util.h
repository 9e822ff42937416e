/* util.h — error reporting, files written atomically, small JSON helpers shared by every module.
 *
 * Responsible for: the KvErr message carrier (library code never prints or exits; it fills a
 * KvErr and returns -1 or NULL), reading whole files, writing files via temp + rename so a good
 * result is never replaced by a half-written one (and the temporaries in progress removed by a
 * signal handler: kv_atomic_cleanup_on_signal), the check that a command's outputs are none of its
 * inputs (kv_paths_check), and the catalog loader (embedded defaults with a file or directory
 * override).
 * Not responsible for: parsing domain objects (model.c, hw.c, traces/), installing signal handlers
 * (the CLIs do).
 * Invariant: every function that takes a KvErr* leaves a message in it exactly when it fails.
 */
#ifndef KV_UTIL_H
#define KV_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

typedef struct KvErr {
    char msg[1024];
} KvErr;

/* Format a message into e (if non-NULL); returns -1 so callers can `return kv_err(e, ...)`. */
int kv_err(KvErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prepend context ("file.json: ") to an existing message; returns -1. */
int kv_err_prefix(KvErr *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append printf output to the NUL-terminated buf of `size` bytes (cut at its end; nothing when it is full). */
void kv_catf(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Open path for reading, refusing at once what is not a regular file: a FIFO or pipe (it could hang
 * the open or never end), a device (/dev/zero never ends), a directory, a socket — "PATH: not a
 * regular file (a FIFO or pipe); only regular files are read". NULL + message on failure. */
FILE *kv_fopen_regular(const char *path, KvErr *e);
/* what a file of this st_mode is when it is not a regular file ("a FIFO or pipe", "a device", ...);
 * NULL for a regular file */
const char *kv_special_file_kind(mode_t mode);

/* Read a whole regular file (kv_fopen_regular), NUL-terminated. Caller frees. NULL + message on failure. */
char *kv_read_file(const char *path, size_t *len, KvErr *e);

/* Write data to path atomically: path.tmp.PID, fsync, rename. */
int kv_write_atomic(const char *path, const void *data, size_t len, KvErr *e);

/* An atomic writer for streamed output: open gives a FILE* on a temp file (path.tmp.PID, in path's
 * directory, so the rename stays on one filesystem); commit renames it over path, abort removes
 * it. A failed write (any fwrite, the final fflush, fsync or fclose: a full disk, a file size
 * limit) fails the commit naming path and the cause, and removes the temp file: path keeps what it
 * held before. While open, the temp file is listed for kv_atomic_cleanup_on_signal (at most
 * KV_ATOMIC_LIVE_MAX at once per process; more are still written, not listed). */
typedef struct KvAtomicFile {
    FILE *f;
    char path[4096];
    char tmp[4200];
    int live; /* 1 + its entry in the signal-time list; 0: not listed (a zeroed struct) */
} KvAtomicFile;
#define KV_ATOMIC_LIVE_MAX 32
int kv_atomic_open(KvAtomicFile *af, const char *path, KvErr *e);
/* One CSV field (RFC 4180): as is, or quoted with inner quotes doubled when it holds a comma, a
 * quote or a line break. */
void kv_csv_field(FILE *f, const char *s);
/* Numbers as text without printf, for CSV rows: v in decimal ("%llu"), and d with `decimals` digits
 * (1..9) after the point, exactly the text "%.<decimals>f" prints (d's exact binary value scaled in
 * 128-bit integers, rounded to nearest, ties to even, as glibc rounds; negative, non-finite and
 * values of 1e9 or more go through printf). Written at p (room for 24 bytes; 320 for the printf
 * cases); each returns the end. */
char *kv_app_u64(char *p, uint64_t v);
char *kv_app_fixed(char *p, double d, int decimals);
int kv_atomic_commit(KvAtomicFile *af, KvErr *e);
void kv_atomic_abort(KvAtomicFile *af);
/* Remove this process's temp files still open (async-signal-safe: unlink only); for a SIGINT or
 * SIGTERM handler that then dies of the signal. Files of a forked child are its own to remove. */
void kv_atomic_cleanup_on_signal(void);
/* Files committed under dir (a path prefix ending at a '/') skip their own fsync: whoever set it
 * makes the whole directory durable at once (results/resultset.c: one syncfs before the swap).
 * NULL: every commit fsyncs its file again. One such directory per process. */
void kv_atomic_defer_sync(const char *dir);
/* A temporary file of ours outside a KvAtomicFile (listed the same way: kv_atomic_cleanup_on_signal
 * removes it): 1 + its entry, or 0 when the list is full (the file is then not removed on a signal);
 * untrack before removing or renaming it. */
int kv_temp_track(const char *path);
void kv_temp_untrack(int slot);
/* handler for SIGINT, SIGTERM and SIGHUP (SIGHUP only when it is not ignored: nohup stays nohup),
 * for a main's "clean up, then die of the signal" */
void kv_install_stop_handlers(void (*handler)(int));

/* One path a command reads or writes, for kv_paths_check. */
typedef struct KvPathArg {
    const char *opt;  /* how the user named it, for messages: "--trace", "--out", "INPUT" */
    const char *path; /* NULL or "": not given (skipped) */
    int whole_dir;    /* an output directory that the command replaces as a whole (run's --out DIR) */
} KvPathArg;
/* Before a command writes anything: no output is one of its inputs or another output, and nothing
 * it reads or writes lies in a whole_dir output. The same file: the same st_dev and st_ino (links
 * and other spellings included); an output not there yet cannot be an input, and two such outputs
 * are the same when their directories are and their names are equal. 0, or -1 with a message naming
 * both options and paths ("--trace-out t.csv is the same file as --trace t.csv: ..."). */
int kv_paths_check(const KvPathArg *in, int n_in, const KvPathArg *out, int n_out, KvErr *e);

/* mkdir -p */
int kv_mkdirs(const char *dir, KvErr *e);

/* Catalog text: if override is a path, read it; else if $KVSIM_CONFIG_DIR/name exists, read that;
 * else the copy embedded at build time (name is e.g. "configs/models.json"). *origin receives a
 * static description ("embedded" or the path). Caller frees the result. */
char *kv_catalog_text(const char *name, const char *override, char *origin, size_t origin_len, KvErr *e);

/* Files compiled into the binary (catalogs, scenarios): count and names ("configs/..."). */
int kv_embedded_count(void);
const char *kv_embedded_name(int i);
/* the embedded copy of name (NUL-terminated; *len its bytes without the NUL), NULL when not embedded */
const char *kv_embedded(const char *name, size_t *len);
/* the SHA-256 (64 hex digits) of the embedded copy of name (kv_embedded's bytes), computed at build
 * time; NULL when name is not embedded */
const char *kv_embedded_sha256(const char *name);

/* The build's git revision (or "unknown"). */
const char *kv_git_rev(void);

/* Parse helpers for CLI values: integers with an optional K/M/G suffix (powers of 1000 unless the
 * suffix has an i: Ki/Mi/Gi), strict (whole string). Return -1 with message on bad input. */
int kv_parse_i64(const char *s, int64_t *out, KvErr *e);
int kv_parse_double(const char *s, double *out, KvErr *e);

/* Minimum/maximum of int64s. */
static inline int64_t kv_min_i64(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t kv_max_i64(int64_t a, int64_t b) { return a > b ? a : b; }

#define KV_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
