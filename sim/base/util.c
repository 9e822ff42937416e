/* util.c — see util.h. */
#include "sim/base/util.h"

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <signal.h>
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

/* The temp files open in this process, for the signal handler: an entry is written whole before
 * it is marked used, and unmarked before its file is renamed or removed, so the handler only ever
 * unlinks a complete name of a file still ours. owner: the pid that listed them (a forked child
 * inherits the list but not the files' ownership). */
static struct {
    volatile sig_atomic_t used;
    char tmp[4200];
} g_live[KV_ATOMIC_LIVE_MAX];
static volatile pid_t g_live_owner;

int kv_temp_track(const char *path)
{
    pid_t self = getpid();
    if (g_live_owner != self) { /* a forked child: its parent's entries are not its files */
        for (int i = 0; i < KV_ATOMIC_LIVE_MAX; i++) g_live[i].used = 0;
        g_live_owner = self;
    }
    if (strlen(path) >= sizeof g_live[0].tmp) return 0;
    for (int i = 0; i < KV_ATOMIC_LIVE_MAX; i++)
        if (!g_live[i].used) {
            snprintf(g_live[i].tmp, sizeof g_live[i].tmp, "%s", path);
            g_live[i].used = 1;
            return i + 1;
        }
    return 0;
}

void kv_temp_untrack(int slot)
{
    if (slot > 0 && slot <= KV_ATOMIC_LIVE_MAX && g_live_owner == getpid()) g_live[slot - 1].used = 0;
}

static void live_add(KvAtomicFile *af) { af->live = kv_temp_track(af->tmp); }

static void live_drop(KvAtomicFile *af)
{
    kv_temp_untrack(af->live);
    af->live = 0;
}

void kv_atomic_cleanup_on_signal(void)
{
    if (g_live_owner != getpid()) return;
    for (int i = 0; i < KV_ATOMIC_LIVE_MAX; i++)
        if (g_live[i].used) {
            g_live[i].used = 0;
            unlink(g_live[i].tmp);
        }
}

/* the directory whose files are synced as a whole by their owner (kv_atomic_defer_sync), "" when none */
static char g_defer_dir[4200];
static size_t g_defer_len;

void kv_atomic_defer_sync(const char *dir)
{
    g_defer_len = 0;
    g_defer_dir[0] = '\0';
    if (dir && *dir && snprintf(g_defer_dir, sizeof g_defer_dir, "%s/", dir) < (int)sizeof g_defer_dir) g_defer_len = strlen(g_defer_dir);
}

static int sync_deferred(const char *path) { return g_defer_len && !strncmp(path, g_defer_dir, g_defer_len); }

int kv_atomic_open(KvAtomicFile *af, const char *path, KvErr *e)
{
    memset(af, 0, sizeof *af);
    if (strlen(path) >= sizeof af->path) return kv_err(e, "%s: path too long", path);
    snprintf(af->path, sizeof af->path, "%s", path);
    snprintf(af->tmp, sizeof af->tmp, "%s.tmp.%ld", path, (long)getpid());
    af->f = fopen(af->tmp, "wb");
    if (!af->f) return kv_err(e, "%s: cannot create: %s", af->tmp, strerror(errno));
    live_add(af);
    return 0;
}

int kv_atomic_commit(KvAtomicFile *af, KvErr *e)
{
    if (!af->f) return kv_err(e, "%s: not open", af->path);
    /* the first failure's cause: a write that failed before (ferror) is normally retried by the
     * final fflush and fails again with its errno; one that does not is still a lost write */
    const char *cause = NULL;
    int er = 0;
    if (fflush(af->f) != 0) er = errno;
    else if (ferror(af->f)) cause = "an earlier write failed (part of the data is missing)";
    if (!er && !cause && !sync_deferred(af->path) && fsync(fileno(af->f)) != 0 && errno != EINVAL) er = errno;
    if (fclose(af->f) != 0 && !er && !cause) er = errno;
    af->f = NULL;
    live_drop(af);
    if (er || cause) {
        unlink(af->tmp);
        return kv_err(e, "%s: write failed: %s; nothing was written", af->path, cause ? cause : strerror(er));
    }
    if (rename(af->tmp, af->path) != 0) {
        int er2 = errno;
        unlink(af->tmp);
        return kv_err(e, "%s: cannot rename into place: %s", af->path, strerror(er2));
    }
    return 0;
}

void kv_atomic_abort(KvAtomicFile *af)
{
    if (af->f) {
        fclose(af->f);
        af->f = NULL;
        live_drop(af);
        unlink(af->tmp);
    }
}

int kv_write_atomic(const char *path, const void *data, size_t len, KvErr *e)
{
    KvAtomicFile af;
    if (kv_atomic_open(&af, path, e) != 0) return -1;
    if (len && fwrite(data, 1, len, af.f) != len) {
        int er = errno;
        kv_atomic_abort(&af);
        return kv_err(e, "%s: write failed: %s; nothing was written", path, strerror(er));
    }
    return kv_atomic_commit(&af, e);
}

/* ---- outputs against inputs ---- */

/* path's directory and last name (dir "." for a bare name); -1 when path ends in '/' or is too long */
static int split_last(const char *path, char *dir, size_t dcap, const char **name)
{
    const char *slash = strrchr(path, '/');
    if (slash && !slash[1]) return -1;
    if (!slash) {
        snprintf(dir, dcap, ".");
        *name = path;
        return 0;
    }
    if (slash == path) snprintf(dir, dcap, "/");
    else if (snprintf(dir, dcap, "%.*s", (int)(slash - path), path) >= (int)dcap) return -1;
    *name = slash + 1;
    return 0;
}

/* a and b name the same file: the same inode when both exist; when neither does (and absent_too),
 * the same directory (inode) and the same name */
static int same_path(const char *a, const char *b, int absent_too)
{
    struct stat sa, sb;
    int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb || !absent_too) return 0;
    char da[4096], db[4096];
    const char *na, *nb;
    if (split_last(a, da, sizeof da, &na) != 0 || split_last(b, db, sizeof db, &nb) != 0 || strcmp(na, nb) != 0) return 0;
    return stat(da, &sa) == 0 && stat(db, &sb) == 0 && sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
}

/* p lies in the directory d (stat'ed as *sd): p's directory is d */
static int lies_in(const char *p, const struct stat *sd)
{
    char dir[4096];
    const char *name;
    struct stat sp;
    if (split_last(p, dir, sizeof dir, &name) != 0) return 0;
    return stat(dir, &sp) == 0 && sp.st_dev == sd->st_dev && sp.st_ino == sd->st_ino;
}

static int given(const KvPathArg *a) { return a->path && a->path[0]; }

int kv_paths_check(const KvPathArg *in, int n_in, const KvPathArg *out, int n_out, KvErr *e)
{
    for (int o = 0; o < n_out; o++) {
        if (!given(&out[o])) continue;
        for (int i = 0; i < n_in; i++)
            if (given(&in[i]) && same_path(out[o].path, in[i].path, 0)) /* an absent input is no file (a generator's name) */
                return kv_err(e, "%s %s is the same file as %s %s: writing it would destroy the input; name another output",
                              out[o].opt, out[o].path, in[i].opt, in[i].path);
        for (int p = o + 1; p < n_out; p++)
            if (given(&out[p]) && same_path(out[o].path, out[p].path, 1))
                return kv_err(e, "%s %s and %s %s are the same file: one output would overwrite the other", out[o].opt,
                              out[o].path, out[p].opt, out[p].path);
        struct stat sd;
        if (!out[o].whole_dir || stat(out[o].path, &sd) != 0 || !S_ISDIR(sd.st_mode)) continue;
        for (int k = 0; k < n_in + n_out; k++) {
            const KvPathArg *x = k < n_in ? &in[k] : &out[k - n_in];
            struct stat sx;
            if (x == &out[o] || !given(x)) continue;
            if (stat(x->path, &sx) == 0 && sx.st_dev == sd.st_dev && sx.st_ino == sd.st_ino)
                return kv_err(e, "%s %s is the directory %s %s, which the results replace as a whole", x->opt, x->path,
                              out[o].opt, out[o].path);
            if (!lies_in(x->path, &sd)) continue;
            return kv_err(e, "%s %s lies in %s %s, which the results replace as a whole: %s", x->opt, x->path, out[o].opt,
                          out[o].path, k < n_in ? "the input would be removed" : "the output would be removed");
        }
    }
    return 0;
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

char *kv_app_u64(char *p, uint64_t v)
{
    char tmp[24], *b = tmp + sizeof tmp;
    do *--b = (char)('0' + v % 10);
    while ((v /= 10) > 0);
    size_t n = (size_t)(tmp + sizeof tmp - b);
    memcpy(p, b, n);
    return p + n;
}

char *kv_app_fixed(char *p, double d, int decimals)
{
    static const uint32_t scale[10] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000, 1000000000};
    if (decimals < 1 || decimals > 9 || !(d >= 0 && d < 1e9) || signbit(d)) return p + sprintf(p, "%.*f", decimals, d);
    int e;
    double fr = frexp(d, &e);               /* d = fr · 2^e, fr in [0.5, 1) (or 0) */
    uint64_t m = (uint64_t)ldexp(fr, 53);   /* exact: d = m · 2^(e − 53) */
    e -= 53;                                /* d < 1e9 < 2^53: e < 0 */
    unsigned __int128 x = (unsigned __int128)m * scale[decimals], q;
    if (-e >= 120) {
        q = 0; /* x < 2^83: below half a unit */
    } else {
        int sh = -e;
        q = x >> sh;
        unsigned __int128 rem = x - (q << sh), half = (unsigned __int128)1 << (sh - 1);
        if (rem > half || (rem == half && (q & 1))) q++;
    }
    uint64_t v = (uint64_t)q;
    p = kv_app_u64(p, v / scale[decimals]);
    *p++ = '.';
    uint64_t frac = v % scale[decimals];
    for (int i = decimals - 1; i >= 0; i--) {
        p[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    return p + decimals;
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

void kv_install_stop_handlers(void (*handler)(int))
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if (sigaction(SIGHUP, NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaction(SIGHUP, &sa, NULL);
}
