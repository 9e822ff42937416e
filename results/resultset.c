/* resultset.c — a results directory committed as a set; see resultset.h.
 *
 * The swap: renameat2(RENAME_EXCHANGE) exchanges D and D.tmp.<pid> atomically (a reader sees the
 * old directory or the new one), after which D.tmp.<pid> holds the old set and is removed. Where
 * the filesystem refuses the exchange, D is renamed to D.old.<pid>, the new set to D, and the old
 * removed: a reader may then find D missing for an instant, never mixed. SIGINT, SIGTERM and
 * SIGHUP are blocked during the swap, so the signal-time cleanup never meets a half-done one.
 *
 * Durability: the files of the set are not synced one by one (kv_atomic_defer_sync); rs_commit
 * makes the whole set durable with one syncfs on D.tmp.<pid> before the swap (it fails the commit
 * when writing back any of them failed), and the rename is the commit: it is not synced again, so
 * a crash right after it may bring back the old set, whole.
 *
 * Costs: rs_begin reads D's parent directory once (stale temporaries) and D once (foreign
 * files); rs_commit is one syncfs, one or two renames and the removal of the old files.
 */
#include "results/resultset.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

/* The set in progress, for the signal handler. */
static ResultSet *volatile g_active;

static const char *const k_result_files[] = {
    "summary.json",    "requests.csv",   "table.md",         "ttft_cdf.svg",   "ttft_ccdf.svg",
    "report.md",       "report.json",    "plan.md",          "plan.json",      "utilisation.csv",
    "utilisation.svg", "ttft_split.svg", "ttft_history.svg", "timeline.csv",   "timeline.svg",
    "slo_vs_load.svg", "metric_vs_load.svg", "heatmap.svg", "verdict.md", "report.html"};

/* name ends in ".tmp.<digits>" (our writers' temporaries) or, with kind, is exactly
 * base + kind + <digits>; *pid receives the digits. */
static int tmp_suffix(const char *name, const char *base, const char *kind, long *pid)
{
    const char *p = name;
    if (base) {
        size_t bl = strlen(base), kl = strlen(kind);
        if (strncmp(p, base, bl) != 0 || strncmp(p + bl, kind, kl) != 0) return 0;
        p += bl + kl;
    } else {
        const char *t = strstr(name, ".tmp.");
        if (!t) return 0;
        while (strstr(t + 1, ".tmp.")) t = strstr(t + 1, ".tmp.");
        p = t + 5;
    }
    if (!*p) return 0;
    char *end;
    errno = 0;
    long v = strtol(p, &end, 10);
    if (*end || errno || v <= 0) return 0;
    *pid = v;
    return 1;
}

static int pid_alive(long pid) { return pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno == EPERM; }

/* rm -r for our own directories: files and one more level of directories. */
static void remove_tree(const char *path, int depth)
{
    DIR *d = opendir(path);
    if (d) {
        struct dirent *de;
        char sub[PATH_MAX + 256];
        while ((de = readdir(d))) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
            snprintf(sub, sizeof sub, "%s/%s", path, de->d_name);
            if (unlink(sub) != 0 && (errno == EISDIR || errno == EPERM) && depth > 0) remove_tree(sub, depth - 1);
        }
        closedir(d);
    }
    rmdir(path);
}

/* Split dir (no trailing slash) into parent and base. */
static void split_path(const char *dir, char *parent, size_t pcap, const char **base)
{
    const char *slash = strrchr(dir, '/');
    if (!slash) {
        snprintf(parent, pcap, ".");
        *base = dir;
    } else if (slash == dir) {
        snprintf(parent, pcap, "/");
        *base = slash + 1;
    } else {
        snprintf(parent, pcap, "%.*s", (int)(slash - dir), dir);
        *base = slash + 1;
    }
}

/* Temporaries of dead processes beside dir: D.tmp.<pid> removed; D.old.<pid> renamed back to D
 * when D is missing (a crash inside the fallback swap), else removed. */
static void remove_stale(const char *dir, const char *parent, const char *base)
{
    DIR *d = opendir(parent);
    if (!d) return;
    struct dirent *de;
    char path[PATH_MAX + 256];
    while ((de = readdir(d))) {
        long pid;
        int is_tmp = tmp_suffix(de->d_name, base, ".tmp.", &pid);
        int is_old = !is_tmp && tmp_suffix(de->d_name, base, ".old.", &pid);
        if ((!is_tmp && !is_old) || pid_alive(pid)) continue;
        snprintf(path, sizeof path, "%s/%s", parent, de->d_name);
        struct stat st;
        if (is_old && lstat(dir, &st) != 0 && errno == ENOENT && rename(path, dir) == 0) continue;
        remove_tree(path, 1);
    }
    closedir(d);
}

/* dir must be absent, or a directory holding only result files and our temporaries. */
static int check_replaceable(const char *dir, KvErr *e)
{
    struct stat st;
    if (stat(dir, &st) != 0) return errno == ENOENT ? 0 : kv_err(e, "%s: %s", dir, strerror(errno));
    if (!S_ISDIR(st.st_mode)) return kv_err(e, "%s: exists and is not a directory (--out names a results directory)", dir);
    DIR *d = opendir(dir);
    if (!d) return kv_err(e, "%s: cannot read the directory: %s", dir, strerror(errno));
    struct dirent *de;
    int ret = 0;
    while (ret == 0 && (de = readdir(d))) {
        const char *n = de->d_name;
        long pid;
        if (!strcmp(n, ".") || !strcmp(n, "..") || tmp_suffix(n, NULL, NULL, &pid)) continue;
        int ours = 0;
        for (size_t i = 0; i < KV_ARRAY_LEN(k_result_files); i++) ours |= !strcmp(n, k_result_files[i]);
        if (!ours)
            ret = kv_err(e, "%s: holds '%s', which is not a kvsim result file; a result replaces the whole "
                            "directory, so --out must be new, empty or an earlier result (summary.json, "
                            "requests.csv, table.md, ttft_cdf.svg, ttft_ccdf.svg; kvsim reproduce: report.md, report.json; "
                            "kvsim plan: plan.md, plan.json)",
                         dir, n);
    }
    closedir(d);
    return ret;
}

int rs_begin(ResultSet *rs, const char *dir, KvErr *e)
{
    memset(rs, 0, sizeof *rs);
    rs->tmp_fd = -1;
    rs->fault_after = -1;
    if (!dir || !*dir) return kv_err(e, "results directory: empty name");
    char d[PATH_MAX];
    if (snprintf(d, sizeof d, "%s", dir) >= (int)sizeof d) return kv_err(e, "%.200s...: path too long", dir);
    size_t len = strlen(d);
    while (len > 1 && d[len - 1] == '/') d[--len] = '\0';
    struct stat st;
    if (lstat(d, &st) == 0 && S_ISLNK(st.st_mode)) { /* replace what the link points to, keep the link */
        char real[PATH_MAX];
        if (!realpath(d, real)) return kv_err(e, "%s: a link to nowhere: %s", d, strerror(errno));
        snprintf(d, sizeof d, "%s", real);
    }
    if (!strcmp(d, "/") || !strcmp(d, ".") || !strcmp(d, "..") || (len >= 2 && !strcmp(d + len - 2, "/.")) ||
        (len >= 3 && !strcmp(d + len - 3, "/..")))
        return kv_err(e, "%s: name a results directory by its own name (not /, . or ..)", dir);
    char parent[PATH_MAX];
    const char *base;
    split_path(d, parent, sizeof parent, &base);
    if (kv_mkdirs(parent, e) != 0) return -1;
    remove_stale(d, parent, base);
    if (check_replaceable(d, e) != 0) return -1;
    snprintf(rs->dir, sizeof rs->dir, "%s", d);
    snprintf(rs->tmp, sizeof rs->tmp, "%s.tmp.%ld", d, (long)getpid());
    remove_tree(rs->tmp, 1); /* ours from an earlier set of this process, if any */
    if (mkdir(rs->tmp, 0777) != 0) return kv_err(e, "%s: cannot create: %s", rs->tmp, strerror(errno));
    rs->tmp_fd = open(rs->tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rs->tmp_fd < 0) {
        int er = errno;
        rmdir(rs->tmp);
        return kv_err(e, "%s: cannot open: %s", rs->tmp, strerror(er));
    }
    const char *fault = getenv("KVSIM_FAULT_AFTER_FILES");
    if (fault && *fault) rs->fault_after = atoi(fault);
    rs->active = 1;
    g_active = rs;
    kv_atomic_defer_sync(rs->tmp); /* the files are synced together at the commit */
    return 0;
}

int rs_path(ResultSet *rs, const char *name, char *buf, size_t cap, KvErr *e)
{
    if (!rs->active) return kv_err(e, "%s: no result set in progress", name);
    if (rs->fault_after >= 0 && rs->files >= rs->fault_after)
        return kv_err(e, "%s/%s: injected fault (KVSIM_FAULT_AFTER_FILES=%d)", rs->dir, name, rs->fault_after);
    if (snprintf(buf, cap, "%s/%s", rs->tmp, name) >= (int)cap) return kv_err(e, "%s/%s: path too long", rs->tmp, name);
    rs->files++;
    return 0;
}

static void finish(ResultSet *rs)
{
    if (rs->tmp_fd >= 0) close(rs->tmp_fd);
    rs->tmp_fd = -1;
    rs->active = 0;
    kv_atomic_defer_sync(NULL);
    if (g_active == rs) g_active = NULL;
}

int rs_commit(ResultSet *rs, KvErr *e)
{
    if (!rs->active) return kv_err(e, "%s: no result set in progress", rs->dir[0] ? rs->dir : "results");
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    sigprocmask(SIG_BLOCK, &block, &old);
    int ret = 0;
    struct stat st;
    if (syncfs(rs->tmp_fd) != 0 && errno != EINVAL && errno != ENOSYS)
        ret = kv_err(e, "%s: writing the results to disk failed: %s; the earlier results stay", rs->dir, strerror(errno));
    else if (lstat(rs->dir, &st) != 0) {
        if (rename(rs->tmp, rs->dir) != 0) ret = kv_err(e, "%s: cannot move the results in place: %s", rs->dir, strerror(errno));
    } else if (renameat2(AT_FDCWD, rs->tmp, AT_FDCWD, rs->dir, RENAME_EXCHANGE) == 0) {
        remove_tree(rs->tmp, 1); /* now the old set */
    } else if (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP) {
        char aside[PATH_MAX + 32];
        snprintf(aside, sizeof aside, "%s.old.%ld", rs->dir, (long)getpid());
        if (rename(rs->dir, aside) != 0) {
            ret = kv_err(e, "%s: cannot move the earlier results aside: %s", rs->dir, strerror(errno));
        } else if (rename(rs->tmp, rs->dir) != 0) {
            ret = kv_err(e, "%s: cannot move the results in place: %s", rs->dir, strerror(errno));
            rename(aside, rs->dir);
        } else {
            remove_tree(aside, 1);
        }
    } else {
        ret = kv_err(e, "%s: cannot swap the results in place: %s", rs->dir, strerror(errno));
    }
    if (ret != 0) remove_tree(rs->tmp, 1);
    finish(rs);
    sigprocmask(SIG_SETMASK, &old, NULL);
    return ret;
}

void rs_abort(ResultSet *rs)
{
    if (!rs || !rs->active) return;
    g_active = NULL;
    remove_tree(rs->tmp, 1);
    finish(rs);
}

/* getdents64's record; the kernel ABI (linux/dirent.h), declared here to stay in libc headers. */
struct rs_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

void rs_cleanup_on_signal(void)
{
    ResultSet *rs = g_active;
    if (!rs || !rs->active || rs->tmp_fd < 0) return;
    _Alignas(8) char buf[4096];
    for (int round = 0; round < 256; round++) { /* re-read from the start until nothing is left */
        if (lseek(rs->tmp_fd, 0, SEEK_SET) < 0) break;
        long n = syscall(SYS_getdents64, rs->tmp_fd, buf, sizeof buf);
        if (n <= 0) break;
        int removed = 0;
        for (long off = 0; off < n;) {
            struct rs_dirent64 *d = (struct rs_dirent64 *)(buf + off);
            off += d->d_reclen;
            if (d->d_name[0] == '.' && (d->d_name[1] == '\0' || (d->d_name[1] == '.' && d->d_name[2] == '\0'))) continue;
            if (unlinkat(rs->tmp_fd, d->d_name, 0) == 0) removed++;
        }
        if (!removed) break;
    }
    rmdir(rs->tmp);
}
