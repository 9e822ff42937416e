/* remote_store.c — the remote store of remote_store.h: server processes on the loopback interface. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "calibrate/remote_store.h"

#define RSTORE_REQ_BYTES 16

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++) v |= (uint64_t)p[i] << (8 * i);
    return v;
}

/* read exactly n bytes (0: done; 1: the peer closed before the first byte, 2: after it; -1: an error) */
static int read_full(int fd, unsigned char *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(fd, p + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return -1;
        if (r == 0) return got == 0 ? 1 : 2;
        got += (size_t)r;
    }
    return 0;
}

static int write_full(int fd, const unsigned char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* the server: after fork, async-signal-safe calls only */
static void serve(int fd, const unsigned char *mem, uint64_t bytes)
{
    unsigned char req[RSTORE_REQ_BYTES];
    for (;;) {
        int r = read_full(fd, req, sizeof req);
        if (r == 1) _exit(0);
        if (r != 0) _exit(1);
        uint64_t off = get_u64(req), len = get_u64(req + 8);
        if (off > bytes || len > bytes - off) _exit(2); /* the client checks the range first: a broken protocol */
        if (write_full(fd, mem + off, (size_t)len) != 0) _exit(1);
    }
}

static int no_delay(int fd) { return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &(int){1}, sizeof(int)); }

int rstore_open(RemoteStore *rs, int64_t bytes, int nconn, KvErr *e)
{
    memset(rs, 0, sizeof *rs);
    for (int i = 0; i < RSTORE_MAX_CONN; i++) rs->fd[i] = -1;
    if (bytes < 1) return kv_err(e, "remote store: %lld bytes: expected > 0", (long long)bytes);
    if (nconn < 1 || nconn > RSTORE_MAX_CONN)
        return kv_err(e, "remote store: %d connections: expected 1..%d", nconn, RSTORE_MAX_CONN);
    size_t len = (size_t)bytes;
    unsigned char *mem = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return kv_err(e, "remote store: cannot map %lld bytes (%s)", (long long)bytes, strerror(errno));
    uint64_t st = 0x2545f4914f6cdd1dull;
    for (size_t i = 0; i < len; i++) {
        st ^= st << 13, st ^= st >> 7, st ^= st << 17;
        mem[i] = (unsigned char)st;
    }
    int srv[RSTORE_MAX_CONN];
    for (int i = 0; i < nconn; i++) srv[i] = -1;
    int lfd = socket(AF_INET, SOCK_STREAM, 0), rc = -1;
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(lfd, nconn) != 0 ||
        getsockname(lfd, (struct sockaddr *)&a, &al) != 0) {
        kv_err(e, "remote store: cannot listen on the loopback interface (%s)", strerror(errno));
        goto out;
    }
    for (int i = 0; i < nconn; i++) {
        rs->fd[i] = socket(AF_INET, SOCK_STREAM, 0);
        if (rs->fd[i] < 0 || connect(rs->fd[i], (struct sockaddr *)&a, sizeof a) != 0) {
            kv_err(e, "remote store: cannot connect to 127.0.0.1:%d (%s)", (int)ntohs(a.sin_port), strerror(errno));
            goto out;
        }
        rs->n = i + 1;
        srv[i] = accept(lfd, NULL, NULL);
        if (srv[i] < 0 || no_delay(rs->fd[i]) != 0 || no_delay(srv[i]) != 0) {
            kv_err(e, "remote store: connection %d: %s", i, strerror(errno));
            goto out;
        }
    }
    close(lfd);
    lfd = -1;
    for (int i = 0; i < nconn; i++) {
        pid_t p = fork();
        if (p < 0) {
            kv_err(e, "remote store: cannot start server %d (%s)", i, strerror(errno));
            goto out;
        }
        if (p == 0) { /* the server of connection i: nothing else of the caller's sockets stays open in it */
            for (int j = 0; j < nconn; j++) {
                if (rs->fd[j] >= 0) close(rs->fd[j]);
                if (j != i && srv[j] >= 0) close(srv[j]);
            }
            serve(srv[i], mem, (uint64_t)bytes);
        }
        rs->pid[i] = p;
        close(srv[i]);
        srv[i] = -1;
    }
    rs->bytes = bytes;
    rc = 0;
out:
    if (lfd >= 0) close(lfd);
    for (int i = 0; i < nconn; i++)
        if (srv[i] >= 0) close(srv[i]);
    munmap(mem, len); /* the servers keep their copy */
    if (rc != 0) rstore_close(rs);
    return rc;
}

int rstore_fetch(RemoteStore *rs, int conn, int64_t off, int64_t len, void *dst, KvErr *e)
{
    if (conn < 0 || conn >= rs->n || rs->fd[conn] < 0)
        return kv_err(e, "remote store: connection %d: expected 0..%d", conn, rs->n - 1);
    if (off < 0 || len < 0 || off > rs->bytes || len > rs->bytes - off)
        return kv_err(e, "remote store: a fetch of %lld bytes at %lld: outside its %lld bytes", (long long)len, (long long)off,
                      (long long)rs->bytes);
    unsigned char req[RSTORE_REQ_BYTES];
    put_u64(req, (uint64_t)off);
    put_u64(req + 8, (uint64_t)len);
    if (write_full(rs->fd[conn], req, sizeof req) != 0)
        return kv_err(e, "remote store: connection %d: the request for %lld bytes at %lld failed (%s)", conn, (long long)len,
                      (long long)off, strerror(errno));
    int r = read_full(rs->fd[conn], dst, (size_t)len);
    if (r != 0)
        return kv_err(e, "remote store: connection %d: %s while fetching %lld bytes at %lld", conn,
                      r > 0 ? "closed by the server" : strerror(errno), (long long)len, (long long)off);
    return 0;
}

void rstore_close(RemoteStore *rs)
{
    for (int i = 0; i < rs->n && i < RSTORE_MAX_CONN; i++) {
        if (rs->fd[i] >= 0) close(rs->fd[i]);
        rs->fd[i] = -1;
    }
    for (int i = 0; i < RSTORE_MAX_CONN; i++) {
        if (rs->pid[i] > 0)
            while (waitpid(rs->pid[i], NULL, 0) < 0 && errno == EINTR) {
            }
        rs->pid[i] = 0;
    }
    rs->n = 0;
}
