/* util.c — see util.h. */
#include "sim/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>


int kv_err(KvErr *e, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int kv_err_prefix(KvErr *e, const char *fmt, ...)
{
    if (e) {
        char pre[512], old[sizeof e->msg];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(pre, sizeof pre, fmt, ap);
        va_end(ap);
        memcpy(old, e->msg, sizeof old);
        snprintf(e->msg, sizeof e->msg, "%s%s", pre, old);
    }
    return -1;
}

const char *kv_special_file_kind(mode_t mode)
{
    return S_ISREG(mode) ? NULL
           : S_ISDIR(mode) ? "a directory"
           : S_ISFIFO(mode) ? "a FIFO or pipe"
           : S_ISCHR(mode) || S_ISBLK(mode) ? "a device"
           : "a socket or other special file";
}

FILE *kv_fopen_regular(const char *path, KvErr *e)
{
    /* O_NONBLOCK: opening a FIFO without a writer returns at once instead of waiting for one; it
     * changes nothing for the regular files accepted below */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        kv_err(e, "%s: cannot open: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    const char *kind = NULL;
    if (fstat(fd, &st) != 0) {
        int err = errno;
        close(fd);
        kv_err(e, "%s: cannot open: %s", path, strerror(err));
        return NULL;
    }
    if ((kind = kv_special_file_kind(st.st_mode))) {
        close(fd);
        kv_err(e, "%s: not a regular file (%s); only regular files are read", path, kind);
        return NULL;
    }
    FILE *f = fdopen(fd, "rb");
    if (!f) {
        int err = errno;
        close(fd);
        kv_err(e, "%s: cannot open: %s", path, strerror(err));
    }
    return f;
}

char *kv_read_file(const char *path, size_t *len, KvErr *e)
{
    FILE *f = kv_fopen_regular(path, e);
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) {
        fclose(f);
        kv_err(e, "%s: out of memory", path);
        return NULL;
    }
    for (;;) {
        if (n + 1 >= cap) {
            cap *= 2;
            char *nb = realloc(buf, cap);
            if (!nb) {
                free(buf);
                fclose(f);
                kv_err(e, "%s: out of memory", path);
                return NULL;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad) {
        free(buf);
        kv_err(e, "%s: read error", path);
        return NULL;
    }
    buf[n] = '\0';
    if (len) *len = n;
    return buf;
}

int kv_atomic_open(KvAtomicFile *af, const char *path, KvErr *e)
{
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->path) return kv_err(e, "%s: path too long", path);
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) return kv_err(e, "%s: cannot create: %s", af->tmp, strerror(errno));
    return 0;
}

int kv_atomic_commit(KvAtomicFile *af, KvErr *e)
{
    if (!af->f) return kv_err(e, "%s: not open", af->path);
    int bad = fflush(af->f) != 0 || ferror(af->f);
    if (!bad) bad = fsync(fileno(af->f)) != 0 && errno != EINVAL;
    if (fclose(af->f) != 0) bad = 1;
    af->f = NULL;
    if (bad) {
        unlink(af->tmp);
        return kv_err(e, "%s: write failed: %s", af->path, strerror(errno));
    }
    if (rename(af->tmp, af->path) != 0) {
        int er = errno;
        unlink(af->tmp);
        return kv_err(e, "%s: cannot rename into place: %s", af->path, strerror(er));
    }
    return 0;
}

void kv_atomic_abort(KvAtomicFile *af)
{
    if (af->f) {
        fclose(af->f);
        af->f = NULL;
        unlink(af->tmp);
    }
}

int kv_write_atomic(const char *path, const void *data, size_t len, KvErr *e)
{
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    if (len && fwrite(data, 1, len, af.f) != len) {
        kv_atomic_abort(&af);
        return kv_err(e, "%s: short write", path);
    }
    return kv_atomic_commit(&af, e);
}

int kv_mkdirs(const char *dir, KvErr *e)
{
    char buf[4096];
    if (snprintf(buf, sizeof buf, "%s", dir) >= (int)sizeof buf) return kv_err(e, "%s: path too long", dir);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST) return kv_err(e, "%s: cannot create directory: %s", buf, strerror(errno));
            *p = c;
            if (c == '\0') break;
        }
    }
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode)) return kv_err(e, "%s: not a directory", dir);
    return 0;
}

const char *kv_embedded(const char *name, size_t *len); /* build/gen/embedded.c */

char *kv_catalog_text(const char *name, const char *override, char *origin, size_t origin_len, KvErr *e)
{
    if (override && *override) {
        if (origin) snprintf(origin, origin_len, "%s", override);
        return kv_read_file(override, NULL, e);
    }
    const char *dir = getenv("KVSIM_CONFIG_DIR");
    if (dir && *dir) {
        const char *base = strrchr(name, '/');
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, base ? base + 1 : name);
        if (access(path, R_OK) == 0) {
            if (origin) snprintf(origin, origin_len, "%s", path);
            return kv_read_file(path, NULL, e);
        }
    }
    size_t n = 0;
    const char *emb = kv_embedded(name, &n);
    if (!emb) {
        kv_err(e, "%s: no embedded copy and no override given", name);
        return NULL;
    }
    char *out = malloc(n + 1);
    if (!out) {
        kv_err(e, "%s: out of memory", name);
        return NULL;
    }
    memcpy(out, emb, n + 1);
    if (origin) snprintf(origin, origin_len, "%s (embedded)", name);
    return out;
}


int kv_parse_i64(const char *s, int64_t *out, KvErr *e)
{
    if (!s || !*s) return kv_err(e, "empty number");
    errno = 0;
    char *end;
    long double v = strtold(s, &end);
    if (end == s || errno) return kv_err(e, "'%s' is not a number", s);
    long double mul = 1;
    if (*end) {
        int bin = end[1] == 'i';
        long double base = bin ? 1024.0L : 1000.0L;
        switch (*end) {
        case 'K': case 'k': mul = base; break;
        case 'M': mul = base * base; break;
        case 'G': mul = base * base * base; break;
        case 'T': mul = base * base * base * base; break;
        default: return kv_err(e, "'%s': unknown suffix '%s' (K, M, G, T, or Ki, Mi, Gi, Ti)", s, end);
        }
        end += 1 + bin;
        if (*end == 'B') end++;
        if (*end) return kv_err(e, "'%s': trailing characters '%s'", s, end);
    }
    v *= mul;
    if (v > 9.2e18L || v < -9.2e18L) return kv_err(e, "'%s' is out of range", s);
    if (v != (long double)(int64_t)v) return kv_err(e, "'%s' is not an integer", s);
    *out = (int64_t)v;
    return 0;
}

int kv_parse_double(const char *s, double *out, KvErr *e)
{
    if (!s || !*s) return kv_err(e, "empty number");
    errno = 0;
    char *end;
    double v = strtod(s, &end);
    if (end == s || *end || errno) return kv_err(e, "'%s' is not a number", s);
    *out = v;
    return 0;
}

void kv_csv_field(FILE *f, const char *s)
{
    if (!s[strcspn(s, ",\"\r\n")]) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"') fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

void kv_catf(char *buf, size_t size, const char *fmt, ...)
{
    size_t n = strlen(buf);
    if (n + 1 >= size) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + n, size - n, fmt, ap);
    va_end(ap);
}
