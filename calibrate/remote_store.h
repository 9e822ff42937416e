/* remote_store.h — a remote store on this machine: the remote tier of kvsim's hierarchy (a
 * session's saved state on another machine, fetched over the NIC) as kvcal measures and replays it
 * without a second machine. A separate process holds the store's bytes in its own memory and serves
 * byte ranges over TCP connections on the loopback interface, one server process per connection (a
 * connection is one NIC: two connections' fetches run in parallel, as two stages' NICs do).
 *
 * Responsible for: starting the server processes (rstore_open), one fetch of a byte range into a
 * caller's buffer (rstore_fetch: request, then every byte of the answer), stopping them and reaping
 * them (rstore_close, also when open fails half-way).
 * Not responsible for: what a fetch is for (calibrate/execute.c, calibrate/probe_io.c), pacing to an
 * emulated network rate (the callers).
 * Protocol: per fetch the client sends 16 bytes — offset and length, little-endian u64 — and the
 * server answers with exactly `length` bytes of its memory from `offset`; a range outside the store
 * closes the connection (the client reports it). TCP_NODELAY on both ends.
 * Invariants: a server touches only read/write/close/_exit after fork (async-signal-safe: the caller
 * may have threads); its memory was filled before the fork and the parent's mapping is dropped, so
 * a fetch reads the server's pages, not the client's; SIGPIPE never fires (MSG_NOSIGNAL); a server
 * whose connection ends exits, and rstore_close reaps every server it started.
 * Complexity: a fetch is one request and len / (socket buffer) receives; memory: `bytes` in the
 * servers (shared copy-on-write, read only).
 */
#ifndef KV_REMOTE_STORE_H
#define KV_REMOTE_STORE_H

#include <stdint.h>
#include <sys/types.h>

#include "sim/base/util.h"

#define RSTORE_MAX_CONN 16

typedef struct RemoteStore {
    int n;                       /* connections (servers) */
    int fd[RSTORE_MAX_CONN];     /* the client end of each (-1: closed) */
    pid_t pid[RSTORE_MAX_CONN];  /* its server process (0: none) */
    int64_t bytes;               /* the store's size */
} RemoteStore;

/* Start `nconn` (1..RSTORE_MAX_CONN) servers over one store of `bytes` (> 0) pseudo-random bytes. */
int rstore_open(RemoteStore *rs, int64_t bytes, int nconn, KvErr *e);
/* Fetch [off, off + len) over connection `conn` into dst (len bytes). */
int rstore_fetch(RemoteStore *rs, int conn, int64_t off, int64_t len, void *dst, KvErr *e);
/* Close the connections and reap the servers; a zeroed or closed store is fine. */
void rstore_close(RemoteStore *rs);

#endif
