/* waitq.c — a replica's admission FIFO of released turns, in bounded memory.
 *
 * Responsible for: keeping the FIFO of Turns (RQ_QUEUED, release order) with at most ~3 bound
 * entries in memory however long it grows: the head part (rp->qh, what admission looks at), the
 * newest turns (rp->qt) and, between them, a spill file (an unlinked temporary file of fixed-size
 * 64-byte records, written at its end and read back in order). In FIFO order the turns are
 * qh, then the file, then qt; a push appends to qt; while the file is empty qt moves into qh up to
 * the bound; once qt holds 2 bounds the oldest bound of it goes to the file, so a turn reaches the
 * file only after `bound` newer turns were released (time for its session's later turns to be read
 * from the trace). A spilled turn is one of:
 *   - WR_WARM: the Turn's fields and its Session's address (the session stays in memory; the record
 *     holds the Turn's reference on it);
 *   - WR_SESS + the Session's image (packed: its nonzero words, ≤ WR_IMG_RECS records) + n × WR_TURN: a cold session
 *     (sess_is_cold: nothing resident, saved or in flight, no turn outside its pending list and this
 *     one, a name of at most WR_NAME bytes) with its queued turn and its pending turns: the Session
 *     leaves the session map (sess_detach) and is made again from its image when the record is read
 *     back (sess_reattach, which merges the "ghost" session.c made if the trace named the session
 *     meanwhile).
 * A WR_WARM turn's session stays in memory, but its pending turns do not: at the spill they go to
 * the side file as one run of WR_TURN records (and a turn the trace adds meanwhile, while none is in
 * memory, as a run of its own); the session names its newest run (pend_side), each run the one
 * before; they come back, in order and ahead of any in memory, when the turn is read back (also
 * from a cold session's image, if it went cold meanwhile). A batch's runs are written together and
 * read back in the same (FIFO) order, through their own read-ahead buffer.
 * Reading back fills qh with up to `bound` entries when qh is empty. The head is the same turn, the
 * order the same and every field of every turn and session the same as without a file: results
 * never depend on the bound (tests waitq_spill_identical_*).
 * Not responsible for: admission decisions (lifecycle.c), preempted requests (rp->pre), the session
 * map (session.c).
 * Invariants: rp->q_len = qh.n + file entries + qt.n; file entries = 0 ⇒ records read = written (both
 * reset to 0); while the file holds entries nothing moves from qt to qh directly. A write that fails
 * (or no temporary file) turns spilling off for the replica (the turns stay in memory; results
 * unchanged); a read that fails ends the run with the file's error.
 * A session whose turn was spilled as WR_WARM and that goes cold later (its saved state dropped:
 * tier.c calls Sim.state_dropped, waitq_state_dropped) goes too: its group to the end of a side file (buffered), its
 * turn's record rewritten in place (its first WR_PATCH_BYTES) into a WR_SREF to that group. Those
 * rewrites are buffered (up to WAITQ_PATCHES; one in the read-ahead buffer is made there only) and
 * written sorted by position, nearby ones as one read-modify-write of the span between them, before
 * a read of the file reaches the lowest of them or when the buffer is full.
 * Complexity: push, head, pop O(1) amortised (plus O(pending turns) when a session is spilled
 * or read back); I/O in batches (a batch of `bound` turns per write, WAITQ_RDBUF records per read,
 * record rewrites in blocks of up to WAITQ_PATCHES, O(P log P) to sort). Memory: ≤ 3 × bound entries in memory
 * (each a Turn, and for a cold session its Session and pending Turns), two 16 KiB buffers per
 * replica (and, once the side file is used, 96 KiB for the rewrites and 16 KiB to read runs back); the files 64 bytes per turn spilled (+ 1 + its packed image per cold session), their space
 * given back (holes punched) once read, per 1 MiB: on disk what waits, not what waited.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sim/engine/engine_int.h"

enum { WR_WARM = 1, WR_COLD, WR_SREF, WR_SESS, WR_TURN };
enum { WF_QUEUED = 1, WF_TRIM = 2, WF_PULLS = 4, WF_NAME = 8 };

#define WAITQ_DEFAULT_BOUND 256
#define WAITQ_REGION 16384 /* records (1 MiB): the unit of disk space given back */

/* one record of the spill file (64 bytes); `ref` and `kind` first, so that a WR_WARM record becomes a
 * WR_SREF with one write of WR_PATCH_BYTES */
typedef struct WaitRec {
    uint64_t ref;    /* WR_WARM: the Session's address; WR_SREF: its group's first record in the side file */
    uint8_t kind;    /* WR_* */
    uint8_t flags;   /* WF_*: a turn's bits; WR_SESS: WF_NAME when it has a name */
    uint8_t name_len;
    uint8_t pad0;
    int32_t i32;     /* a turn: its turn number */
    uint64_t id;     /* a turn: its id; WR_SESS: the session id */
    union {
        struct {
            int64_t offered_ns, when_ns, think_ns;
            uint32_t hist, nnew, nout, pad;
        } t;
        struct {
            uint32_t nturns; /* WR_TURN records that follow the image: its pending turns */
            char name[WR_NAME];
        } s;
    } u;
} WaitRec;
#define WR_PATCH_BYTES 9 /* ref and kind */
#define WR_SREF_SHIFT 44 /* WR_SREF's ref: the group's first record | its length << WR_SREF_SHIFT */
_Static_assert(sizeof(WaitRec) == 64, "spill records are 64 bytes");
/* a Session's image: its fixed part (spill_rec cleared) and its 2 × S save positions, as 8-byte
 * words (sess_size(sm) / 8 of them; at most WR_IMG_WORDS, at SIM_MAX_STAGES stages) */
#define WR_IMG_WORDS ((sizeof(Session) + 2 * SIM_MAX_STAGES * sizeof(int64_t)) / 8)
#define WR_IMG_RECS ((WR_IMG_WORDS * 8 + sizeof(WaitRec) - 1) / sizeof(WaitRec)) /* a Session's image, at most */
/* the image is packed: a mask of the Session's nonzero 8-byte words, then those words (a cold
 * session is mostly zeros: 1-3 records instead of WR_IMG_RECS); WR_SESS's i32 holds its records */
_Static_assert(sizeof(Session) % 8 == 0, "a Session's fixed part is whole words");
_Static_assert(WR_IMG_WORDS <= 64, "a Session's image mask is one 64-bit word");
_Static_assert(WR_IMG_WORDS + 1 <= WR_IMG_RECS * 8, "a packed image fits WR_IMG_RECS records");

/* s's image in w (WR_IMG_WORDS words, zero past it); returns its words */
static size_t img_words(const Sim *sm, const Session *s, uint64_t *w)
{
    Session img = *s;
    img.spill_rec = 0;
    memset(w, 0, WR_IMG_WORDS * sizeof *w);
    memcpy(w, &img, sizeof img);
    memcpy(w + sizeof img / 8, s->pos, 2 * (size_t)sm->S * sizeof *s->pos);
    return sess_size(sm) / 8;
}

/* the records of s's packed image */
static size_t img_recs(const Sim *sm, const Session *s)
{
    uint64_t w[WR_IMG_WORDS];
    size_t n = img_words(sm, s, w), nz = 0;
    for (size_t i = 0; i < n; i++) nz += w[i] != 0;
    return (1 + nz + 7) / 8;
}

static size_t g_bound; /* tests: the in-memory bound (0: the default) */

void sim_test_set_queue_bound(size_t entries) { g_bound = entries; }

void waitq_init(Sim *sm, Replica *rp)
{
    rp->q_bound = g_bound ? g_bound : WAITQ_DEFAULT_BOUND;
}

/* ------------------------------------------------------------------ rings of Turn pointers */

static int ring_push(Sim *sm, TurnRing *q, Turn *t)
{
    if (q->n == q->cap) {
        size_t nc = q->cap ? q->cap * 2 : 64;
        Turn **nv = malloc(nc * sizeof *nv);
        if (!nv) return sim_fail(sm, "out of memory");
        for (size_t i = 0; i < q->n; i++) nv[i] = turn_ring_at(q, i);
        free(q->v);
        sm->ring_bytes += (nc - q->cap) * sizeof *nv;
        sim_note_waiting(sm);
        q->v = nv;
        q->cap = nc;
        q->head = 0;
    }
    q->v[(q->head + q->n) % q->cap] = t;
    q->n++;
    return 0;
}

static Turn *ring_pop(TurnRing *q)
{
    Turn *t = q->v[q->head];
    q->head = (q->head + 1) % q->cap;
    q->n--;
    return t;
}

/* ------------------------------------------------------------------ records */

static void turn_to_rec(const Turn *t, int kind, WaitRec *w)
{
    memset(w, 0, sizeof *w);
    w->kind = (uint8_t)kind;
    w->flags = (uint8_t)((t->queued ? WF_QUEUED : 0) | (t->trim ? WF_TRIM : 0) | (t->pulls_trace ? WF_PULLS : 0));
    w->i32 = t->turn;
    w->id = t->id;
    w->ref = kind == WR_WARM ? (uint64_t)(uintptr_t)t->s : 0;
    w->u.t.offered_ns = t->offered_ns;
    w->u.t.when_ns = t->when_ns;
    w->u.t.think_ns = t->think_ns;
    w->u.t.hist = t->hist;
    w->u.t.nnew = t->nnew;
    w->u.t.nout = t->nout;
}

static Turn *turn_from_rec(Sim *sm, const WaitRec *w, Session *s)
{
    Turn *t = sim_zalloc(sizeof *t);
    if (!t) return sim_fail(sm, "out of memory"), NULL;
    sm->turn_bytes += sizeof *t;
    sim_note_waiting(sm);
    t->id = w->id;
    t->s = s;
    t->offered_ns = w->u.t.offered_ns;
    t->when_ns = w->u.t.when_ns;
    t->think_ns = w->u.t.think_ns;
    t->hist = w->u.t.hist & 0x7fffffffu;
    t->nnew = w->u.t.nnew & 0x7fffffffu;
    t->nout = w->u.t.nout & 0x7fffffffu;
    t->queued = (w->flags & WF_QUEUED) != 0;
    t->trim = (w->flags & WF_TRIM) != 0;
    t->pulls_trace = (w->flags & WF_PULLS) != 0;
    t->turn = w->i32;
    return t;
}

/* a Turn's memory, the reference on its session kept (by the record, or gone with the session) */
static void turn_drop_mem(Sim *sm, Turn *t)
{
    sm->turn_bytes -= sizeof *t;
    free(t);
}

/* ------------------------------------------------------------------ the file */

static int spill_open(Replica *rp)
{
    if (rp->sp.f || rp->sp.off) return rp->sp.f ? 0 : -1;
    rp->sp.f = tmpfile(); /* unlinked: it goes when closed or when the process ends */
    rp->sp.buf = rp->sp.f ? malloc(WAITQ_RDBUF * sizeof(WaitRec)) : NULL;
    if (!rp->sp.buf) {
        if (rp->sp.f) fclose(rp->sp.f);
    if (rp->sp.side) fclose(rp->sp.side);
        rp->sp.f = NULL;
        rp->sp.off = 1;
        return -1;
    }
    return 0;
}

static int write_recs(FILE *f, const WaitRec *buf, size_t n, uint64_t at)
{
    size_t bytes = n * sizeof *buf;
    ssize_t w = pwrite(fileno(f), buf, bytes, (off_t)(at * sizeof *buf));
    return w >= 0 && (size_t)w == bytes ? 0 : -1;
}

/* a buffered rewrite of a spill-file record: WR_WARM → WR_SREF `ref` */
typedef struct WaitPatch {
    uint64_t at, ref;
} WaitPatch;
#define PATCH_GAP 64   /* records: patches closer than this share one read-modify-write */
#define PATCH_SPAN 512 /* records: the longest span read and written at once (32 KiB) */

static int patch_cmp(const void *a, const void *b)
{
    uint64_t x = ((const WaitPatch *)a)->at, y = ((const WaitPatch *)b)->at;
    return x < y ? -1 : x > y;
}

/* the buffered rewrites into the spill file: sorted, each run of nearby ones as one span read,
 * patched and written back (a lone one: its WR_PATCH_BYTES written) */
static int patch_flush(Sim *sm, Replica *rp)
{
    WaitSpill *sp = &rp->sp;
    WaitPatch *pv = sp->pbuf;
    WaitRec *span = (WaitRec *)(pv + WAITQ_PATCHES);
    int fd = fileno(sp->f);
    qsort(pv, sp->pn, sizeof *pv, patch_cmp);
    for (size_t i = 0, j; i < sp->pn; i = j) {
        for (j = i + 1; j < sp->pn && pv[j].at - pv[j - 1].at <= PATCH_GAP && pv[j].at - pv[i].at < PATCH_SPAN; j++) {}
        int bad;
        if (j == i + 1) {
            WaitRec one;
            one.ref = pv[i].ref;
            one.kind = WR_SREF;
            bad = pwrite(fd, &one, WR_PATCH_BYTES, (off_t)(pv[i].at * sizeof one)) != WR_PATCH_BYTES;
        } else {
            size_t n = (size_t)(pv[j - 1].at - pv[i].at + 1);
            ssize_t got = pread(fd, span, n * sizeof *span, (off_t)(pv[i].at * sizeof *span));
            bad = got < 0 || (size_t)got != n * sizeof *span;
            for (size_t k = i; !bad && k < j; k++) {
                span[pv[k].at - pv[i].at].ref = pv[k].ref;
                span[pv[k].at - pv[i].at].kind = WR_SREF;
            }
            bad = bad || write_recs(sp->f, span, n, pv[i].at) != 0;
        }
        if (bad)
            return sim_fail(sm, "admission queue spill file (a temporary file) of replica %d: rewrite failed: %s", rp->id,
                            strerror(errno));
    }
    sp->pn = 0;
    return 0;
}

/* a cold session's group: WR_SESS (its name, `pend` pending turns), its image, its pending turns */
static size_t group_recs(const Sim *sm, const Session *s, size_t pend, WaitRec *buf)
{
    WaitRec *h = &buf[0];
    memset(h, 0, sizeof *h);
    h->kind = WR_SESS;
    h->id = s->id;
    h->u.s.nturns = (uint32_t)pend;
    if (s->name) {
        size_t len = strlen(s->name);
        h->flags = WF_NAME;
        h->name_len = (uint8_t)len;
        memcpy(h->u.s.name, s->name, len);
    }
    uint64_t w[WR_IMG_WORDS], packed[WR_IMG_RECS * 8] = {0};
    size_t nw = img_words(sm, s, w), nz = 1;
    for (size_t i = 0; i < nw; i++)
        if (w[i]) {
            packed[0] |= 1ull << i;
            packed[nz++] = w[i];
        }
    size_t ni = (nz + 7) / 8;
    h->i32 = (int32_t)ni;
    memcpy(&buf[1], packed, ni * sizeof *buf);
    size_t k = 1 + ni;
    for (Turn *p = s->pend_head; p; p = p->next) turn_to_rec(p, WR_TURN, &buf[k++]);
    return k;
}

/* a cold session whose group was written: its memory goes (its pending turns, itself) */
static void group_drop(Sim *sm, Session *s)
{
    while (s->pend_head) {
        Turn *p = s->pend_head;
        s->pend_head = p->next;
        turn_drop_mem(sm, p);
    }
    sess_detach(sm, s);
}

static void pend_spill_all(Sim *sm, Replica *rp, Session *s);

/* the oldest `bound` turns of qt into the file (nothing when a write fails: spilling goes off) */
static int spill_batch(Sim *sm, Replica *rp)
{
    TurnRing *qt = &rp->qt;
    size_t take = rp->q_bound < qt->n ? rp->q_bound : qt->n;
    if (spill_open(rp) != 0) return 0;
    /* records: one per warm turn; 2 + image + pending turns for a cold session */
    uint64_t *warm_at = malloc(take * sizeof *warm_at); /* a warm turn's record index + 1; cold: 0 */
    size_t *pend = malloc(take * sizeof *pend);         /* a cold session's pending turns (warm: SIZE_MAX) */
    size_t nrec = 0;
    for (size_t i = 0; pend && i < take; i++) {
        Turn *t = turn_ring_at(qt, i);
        if (!sess_is_cold(sm, t->s, &pend[i]) || sess_spill_reserve(sm, t->s->id) != 0) pend[i] = SIZE_MAX;
        nrec += pend[i] != SIZE_MAX ? 2 + img_recs(sm, t->s) + pend[i] : 1;
    }
    WaitRec *buf = pend && warm_at ? malloc(nrec * sizeof *buf) : NULL;
    if (!buf) {
        free(pend);
        free(warm_at);
        return 0; /* stays in memory */
    }
    size_t k = 0;
    for (size_t i = 0; i < take; i++) {
        Turn *t = turn_ring_at(qt, i);
        int cold = pend[i] != SIZE_MAX;
        warm_at[i] = cold ? 0 : rp->sp.wr + k + 1;
        turn_to_rec(t, cold ? WR_COLD : WR_WARM, &buf[k++]);
        if (cold) k += group_recs(sm, t->s, pend[i], &buf[k]);
    }
    int bad = write_recs(rp->sp.f, buf, k, rp->sp.wr);
    free(buf);
    free(pend);
    if (bad) { /* a full disk: keep everything in memory from now on */
        free(warm_at);
        rp->sp.off = 1;
        return 0;
    }
    rp->sp.wr += k;
    rp->sp.n += take;
    for (size_t i = 0; i < take; i++) {
        Turn *t = ring_pop(qt);
        Session *s = t->s;
        turn_drop_mem(sm, t);
        if (warm_at[i]) {
            s->spill_rec = warm_at[i];
            pend_spill_all(sm, rp, s);
        } else {
            group_drop(sm, s);
        }
    }
    free(warm_at);
    return 0;
}

/* give the disk space of records [from, to) of f back (a hole; the file keeps its size); best effort */
static void punch(FILE *f, uint64_t from, uint64_t to)
{
    if (f && to > from)
        (void)fallocate(fileno(f), FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)(from * sizeof(WaitRec)),
                        (off_t)((to - from) * sizeof(WaitRec)));
}

/* a group [at, at + k) of the side file written (d = 1) or read back (d = -1): its regions' counts;
 * a region whose groups were all read and that is written whole goes back to the disk */
static void side_count(WaitSpill *sp, uint64_t at, uint64_t k, int d)
{
    size_t last = (size_t)((at + k - 1) / WAITQ_REGION);
    if (last >= sp->side_regions) {
        if (d < 0) return;
        size_t nr = sp->side_regions ? sp->side_regions : 16;
        while (nr <= last) nr *= 2;
        uint32_t *nl = realloc(sp->side_live, nr * sizeof *nl);
        if (!nl) return; /* no counts: that space stays until the file empties */
        memset(nl + sp->side_regions, 0, (nr - sp->side_regions) * sizeof *nl);
        sp->side_live = nl;
        sp->side_regions = nr;
    }
    for (size_t r = (size_t)(at / WAITQ_REGION); r <= last; r++) {
        if (d > 0) {
            sp->side_live[r]++;
        } else if (sp->side_live[r] > 0 && --sp->side_live[r] == 0 && (r + 1) * (uint64_t)WAITQ_REGION <= sp->side_wr - sp->sbuf_n) {
            punch(sp->side, (uint64_t)r * WAITQ_REGION, (uint64_t)(r + 1) * WAITQ_REGION);
        }
    }
}

/* the side file's unwritten records out */
static int side_flush(Sim *sm, Replica *rp)
{
    WaitSpill *sp = &rp->sp;
    if (sp->sbuf_n && write_recs(sp->side, sp->sbuf, sp->sbuf_n, sp->side_wr - sp->sbuf_n) != 0)
        return sim_fail(sm, "admission queue side file (a temporary file) of replica %d: write failed: %s", rp->id, strerror(errno));
    sp->sbuf_n = 0;
    return 0;
}

/* the side file and its buffers (write, rewrites); -1: none (what would go there stays in memory) */
static int side_open(WaitSpill *sp)
{
    if (sp->side) return 0;
    if (!sp->sbuf) sp->sbuf = malloc(WAITQ_RDBUF * sizeof(WaitRec));
    if (!sp->pbuf) sp->pbuf = malloc(WAITQ_PATCHES * sizeof(WaitPatch) + PATCH_SPAN * sizeof(WaitRec));
    return sp->sbuf && sp->pbuf && (sp->side = tmpfile()) ? 0 : -1;
}

/* s's pending turns as runs of WR_TURN records in the side file: s->pend_side names the newest run
 * (its first record + 1 | its length << WR_SREF_SHIFT; 0: none), each run's first record's ref the
 * run before it */
#define PEND_RUN_MAX ((1ull << (64 - WR_SREF_SHIFT)) - 1)

/* n turns from `first` (along next) to the end of the side file as one run, the newest of s's; their
 * memory is the caller's. -1: not written (they stay in memory) */
static int pend_push(Sim *sm, Replica *rp, Session *s, const Turn *first, size_t n)
{
    WaitSpill *sp = &rp->sp;
    uint64_t at = sp->side_wr;
    if (n == 0 || n > PEND_RUN_MAX || at + 1 >= (1ull << WR_SREF_SHIFT) || side_open(sp) != 0) return -1;
    if (n > WAITQ_RDBUF || sp->sbuf_n + n > WAITQ_RDBUF)
        if (side_flush(sm, rp) != 0) return -1;
    WaitRec *buf = n > WAITQ_RDBUF ? malloc(n * sizeof *buf) : (WaitRec *)sp->sbuf + sp->sbuf_n;
    if (!buf) return -1;
    const Turn *p = first;
    for (size_t i = 0; i < n; i++, p = p->next) turn_to_rec(p, WR_TURN, &buf[i]);
    buf[0].ref = s->pend_side;
    if (n > WAITQ_RDBUF) {
        int bad = write_recs(sp->side, buf, n, at);
        free(buf);
        if (bad) return -1;
    } else {
        sp->sbuf_n += n;
    }
    sp->side_wr += n;
    side_count(sp, at, n, 1);
    s->pend_side = (at + 1) | (uint64_t)n << WR_SREF_SHIFT;
    s->pend_side_n += (uint32_t)n;
    return 0;
}

int waitq_pend_add(Sim *sm, Session *s, Turn *t)
{
    if (s->pend_head || sim_load_mode(sm->cfg) == SIM_LOAD_CONCURRENCY) return 0;
    if (pend_push(sm, &sm->rep[s->replica], s, t, 1) != 0) return 0;
    turn_drop_mem(sm, t);
    return 1;
}

/* s's pending turns in memory to the side file as one run (they stay when it cannot be written) */
static void pend_spill_all(Sim *sm, Replica *rp, Session *s)
{
    if (!s->pend_head || sim_load_mode(sm->cfg) == SIM_LOAD_CONCURRENCY) return;
    size_t n = 0;
    for (const Turn *p = s->pend_head; p; p = p->next) n++;
    if (pend_push(sm, rp, s, s->pend_head, n) != 0) return;
    while (s->pend_head) {
        Turn *p = s->pend_head;
        s->pend_head = p->next;
        turn_drop_mem(sm, p);
    }
    s->pend_tail = NULL;
}

/* records [at, at + n) of the side file into out (a run: not written yet, or written whole) */
static int side_run(Sim *sm, Replica *rp, uint64_t at, size_t n, WaitRec *out)
{
    WaitSpill *sp = &rp->sp;
    uint64_t written = sp->side_wr - sp->sbuf_n;
    if (at + n > sp->side_wr || (at < written && at + n > written))
        return sim_fail(sm, "internal: admission queue side file of replica %d: a run of pending turns out of place", rp->id);
    if (at >= written) {
        memcpy(out, (const WaitRec *)sp->sbuf + (at - written), n * sizeof *out);
        return 0;
    }
    /* read ahead (n <= WAITQ_RDBUF): a batch's runs were written together in FIFO order and are read back in it */
    if (at < sp->tbuf_base || at + n > sp->tbuf_base + sp->tbuf_n) {
        if (!sp->tbuf && !(sp->tbuf = malloc(WAITQ_RDBUF * sizeof(WaitRec)))) return sim_fail(sm, "out of memory");
        size_t want = written - at < WAITQ_RDBUF ? (size_t)(written - at) : WAITQ_RDBUF;
        ssize_t got = pread(fileno(sp->side), sp->tbuf, want * sizeof(WaitRec), (off_t)(at * sizeof(WaitRec)));
        if (got < 0 || (size_t)got != want * sizeof(WaitRec))
            return sim_fail(sm, "admission queue side file (a temporary file) of replica %d: read failed: %s", rp->id,
                            got < 0 ? strerror(errno) : "short read");
        sp->tbuf_base = at;
        sp->tbuf_n = want;
    }
    memcpy(out, (const WaitRec *)sp->tbuf + (at - sp->tbuf_base), n * sizeof *out);
    return 0;
}

/* s's pending turns in the side file back into memory, ahead of those in memory (add_refs: their
 * references counted again: s was made again from its image) */
static int pend_read_back(Sim *sm, Replica *rp, Session *s, int add_refs)
{
    Turn *head = s->pend_head, *tail = s->pend_tail;
    uint64_t total = 0;
    WaitRec tb[WAITQ_RDBUF];
    for (uint64_t ref = s->pend_side; ref;) { /* runs newest first, each put ahead of the later ones */
        uint64_t at = (ref & ((1ull << WR_SREF_SHIFT) - 1)) - 1;
        size_t n = (size_t)(ref >> WR_SREF_SHIFT);
        Turn *rh = NULL, *rt = NULL;
        for (size_t j = 0; j < n; j += WAITQ_RDBUF) {
            size_t m = n - j < WAITQ_RDBUF ? n - j : WAITQ_RDBUF;
            if (side_run(sm, rp, at + j, m, tb) != 0) return -1;
            if (j == 0) ref = tb[0].ref;
            for (size_t i = 0; i < m; i++) {
                if (tb[i].kind != WR_TURN)
                    return sim_fail(sm, "internal: admission queue side file of replica %d: session %llu's pending turns do not match",
                                    rp->id, (unsigned long long)s->id);
                Turn *t = turn_from_rec(sm, &tb[i], s);
                if (!t) return -1;
                if (rt) rt->next = t;
                else rh = t;
                rt = t;
            }
        }
        side_count(&rp->sp, at, n, -1);
        total += n;
        rt->next = head;
        if (!head) tail = rt;
        head = rh;
    }
    if (total != s->pend_side_n)
        return sim_fail(sm, "internal: admission queue side file of replica %d: session %llu has %u pending turns there, %llu found",
                        rp->id, (unsigned long long)s->id, s->pend_side_n, (unsigned long long)total);
    s->pend_head = head;
    s->pend_tail = tail;
    if (add_refs) s->refs += (int)total;
    s->pend_side = 0;
    s->pend_side_n = 0;
    return 0;
}

static void side_spill_session(Sim *sm, Session *s)
{
    Replica *rp = &sm->rep[s->replica];
    WaitSpill *sp = &rp->sp;
    size_t pend = 0;
    if (!s->spill_rec || !sess_is_cold(sm, s, &pend) || sess_spill_reserve(sm, s->id) != 0) return;
    if (side_open(sp) != 0) return; /* it stays in memory */
    size_t k = 1 + img_recs(sm, s) + pend;
    uint64_t at_side = sp->side_wr;
    if (k >= (1u << (64 - WR_SREF_SHIFT)) || at_side >= (1ull << WR_SREF_SHIFT)) return; /* does not fit a WR_SREF: stays */
    /* the group at the end of the side file (buffered when it fits) */
    if (k > WAITQ_RDBUF || sp->sbuf_n + k > WAITQ_RDBUF)
        if (side_flush(sm, rp) != 0) return;
    if (k > WAITQ_RDBUF) {
        WaitRec *buf = malloc(k * sizeof *buf);
        if (!buf) return;
        group_recs(sm, s, pend, buf);
        int bad = write_recs(sp->side, buf, k, at_side);
        free(buf);
        if (bad) return; /* it stays in memory */
    } else {
        group_recs(sm, s, pend, (WaitRec *)sp->sbuf + sp->sbuf_n);
        sp->sbuf_n += k;
    }
    sp->side_wr += k;
    side_count(sp, at_side, k, 1);
    /* its turn's record becomes a WR_SREF to the group (in the read buffer too, if read ahead) */
    uint64_t at = s->spill_rec - 1;
    uint64_t ref = at_side | (uint64_t)k << WR_SREF_SHIFT;
    if (at >= sp->buf_base && at < sp->buf_base + sp->buf_n) {
        /* read ahead already: the file's copy is never read again */
        WaitRec *b = (WaitRec *)sp->buf + (at - sp->buf_base);
        b->ref = ref;
        b->kind = WR_SREF;
    } else {
        WaitPatch *pv = sp->pbuf;
        if (!sp->pn || at < sp->pmin) sp->pmin = at;
        pv[sp->pn].at = at;
        pv[sp->pn].ref = ref;
        sp->pn++;
    }
    s->spill_rec = 0;
    group_drop(sm, s);
    if (sp->pn == WAITQ_PATCHES) (void)patch_flush(sm, rp); /* a failure ends the run (sim_fail) */
}

void waitq_state_dropped(Sim *sm, Session *s)
{
    if (s->spill_rec) side_spill_session(sm, s); /* waiting in a spill file: it may go there whole now */
    else sess_maybe_free(sm, s);
}

/* the next record of the file */
static int rd_rec(Sim *sm, Replica *rp, WaitRec *out)
{
    WaitSpill *sp = &rp->sp;
    if (sp->rd >= sp->wr) return sim_fail(sm, "internal: admission queue spill file of replica %d read past its end", rp->id);
    if (sp->rd < sp->buf_base || sp->rd >= sp->buf_base + sp->buf_n) {
        size_t n = sp->wr - sp->rd < WAITQ_RDBUF ? (size_t)(sp->wr - sp->rd) : WAITQ_RDBUF;
        if (sp->pn && sp->pmin < sp->rd + n && patch_flush(sm, rp) != 0) return -1;
        ssize_t got = pread(fileno(sp->f), sp->buf, n * sizeof(WaitRec), (off_t)(sp->rd * sizeof(WaitRec)));
        if (got < 0 || (size_t)got != n * sizeof(WaitRec))
            return sim_fail(sm, "admission queue spill file (a temporary file) of replica %d: read failed: %s", rp->id,
                            got < 0 ? strerror(errno) : "short read");
        sp->buf_base = sp->rd;
        sp->buf_n = n;
    }
    memcpy(out, (const WaitRec *)sp->buf + (sp->rd - sp->buf_base), sizeof *out);
    sp->rd++;
    return 0;
}

/* n records of a group: the spill file's next ones, or the side file's from *side_at (then advanced) */
static int grp_read(Sim *sm, Replica *rp, uint64_t *side_at, WaitRec *out, size_t n)
{
    if (!side_at) {
        for (size_t i = 0; i < n; i++)
            if (rd_rec(sm, rp, &out[i]) != 0) return -1;
        return 0;
    }
    WaitSpill *sp = &rp->sp;
    const WaitRec *src;
    if (*side_at >= sp->side_wr - sp->sbuf_n) src = (const WaitRec *)sp->sbuf + (*side_at - (sp->side_wr - sp->sbuf_n)); /* not written yet */
    else if (*side_at >= sp->rbuf_base && *side_at + n <= sp->rbuf_base + sp->rbuf_n) src = (const WaitRec *)sp->rbuf + (*side_at - sp->rbuf_base);
    else return sim_fail(sm, "internal: admission queue side file of replica %d: a group not loaded", rp->id);
    memcpy(out, src, n * sizeof *out);
    *side_at += n;
    return 0;
}

/* make the side file's records [at, at + n) readable by grp_read: unwritten (sbuf), or read ahead
 * (rbuf: from `at`, WAITQ_RDBUF records or the group, whichever is more, as far as written) */
static int side_load(Sim *sm, Replica *rp, uint64_t at, size_t n)
{
    WaitSpill *sp = &rp->sp;
    uint64_t written = sp->side_wr - sp->sbuf_n;
    if (at >= written || (at >= sp->rbuf_base && at + n <= sp->rbuf_base + sp->rbuf_n)) return 0;
    size_t want = n > WAITQ_RDBUF ? n : WAITQ_RDBUF;
    if (want > written - at) want = (size_t)(written - at);
    if (want > sp->rbuf_cap) {
        void *nb = realloc(sp->rbuf, want * sizeof(WaitRec));
        if (!nb) return sim_fail(sm, "out of memory");
        sp->rbuf = nb;
        sp->rbuf_cap = want;
    }
    ssize_t got = pread(fileno(sp->side), sp->rbuf, want * sizeof(WaitRec), (off_t)(at * sizeof(WaitRec)));
    if (got < 0 || (size_t)got != want * sizeof(WaitRec))
        return sim_fail(sm, "admission queue side file (a temporary file) of replica %d: read failed: %s", rp->id,
                        got < 0 ? strerror(errno) : "short read");
    sp->rbuf_base = at;
    sp->rbuf_n = want;
    return 0;
}

/* a cold session made again from its group (the ghost's turns after its own pending turns) */
static Session *read_group(Sim *sm, Replica *rp, uint64_t *side_at)
{
    WaitRec hd[1 + WR_IMG_RECS];
    if (grp_read(sm, rp, side_at, hd, 1) != 0) return NULL;
    const WaitRec *w = &hd[0];
    if (w->kind != WR_SESS || w->i32 < 1 || (size_t)w->i32 > WR_IMG_RECS)
        return sim_fail(sm, "internal: admission queue spill file of replica %d: record kind %d, not a session", rp->id, w->kind), NULL;
    size_t ni = (size_t)w->i32;
    if (grp_read(sm, rp, side_at, &hd[1], ni) != 0) return NULL;
    uint64_t packed[WR_IMG_RECS * 8], words[WR_IMG_WORDS] = {0};
    memcpy(packed, &hd[1], ni * sizeof *hd);
    size_t nw = sess_size(sm) / 8; /* this run's image: its mask names none past it, its words fit the records */
    if ((nw < 64 && packed[0] >> nw) || (size_t)__builtin_popcountll(packed[0]) + 1 > ni * 8)
        return sim_fail(sm, "internal: admission queue spill file of replica %d: a session's image is not one of %zu words", rp->id, nw), NULL;
    for (size_t i = 0, used = 1; i < nw; i++)
        if (packed[0] >> i & 1) words[i] = packed[used++];
    char name[WR_NAME + 1];
    memcpy(name, w->u.s.name, w->name_len);
    name[w->name_len] = '\0';
    Session si;
    memcpy(&si, words, sizeof si);
    si.name = NULL;
    si.pend_head = si.pend_tail = NULL;
    Session *s = sess_reattach(sm, &si, (const int64_t *)(words + sizeof si / 8), (w->flags & WF_NAME) ? name : NULL);
    if (!s) return NULL;
    uint32_t nt = w->u.s.nturns;
    WaitRec tb[WAITQ_RDBUF];
    Turn *ph = NULL, *pt = NULL;
    for (uint32_t j = 0; j < nt; j += WAITQ_RDBUF) {
        size_t m = nt - j < WAITQ_RDBUF ? nt - j : WAITQ_RDBUF;
        if (grp_read(sm, rp, side_at, tb, m) != 0) return NULL;
        for (size_t i = 0; i < m; i++) {
            if (tb[i].kind != WR_TURN)
                return sim_fail(sm, "internal: admission queue spill file of replica %d: a session's record is cut short", rp->id), NULL;
            Turn *t = turn_from_rec(sm, &tb[i], s);
            if (!t) return NULL;
            s->refs++;
            if (pt) pt->next = t;
            else ph = t;
            pt = t;
        }
    }
    if (pt) {
        pt->next = s->pend_head;
        if (!s->pend_head) s->pend_tail = pt;
        s->pend_head = ph;
    }
    return s;
}

/* up to `bound` entries from the file into qh (qh is empty) */
static int unspill(Sim *sm, Replica *rp)
{
    WaitSpill *sp = &rp->sp;
    for (size_t got = 0; got < rp->q_bound && sp->n > 0; got++) {
        WaitRec w;
        if (rd_rec(sm, rp, &w) != 0) return -1;
        Session *s;
        if (w.kind == WR_WARM) {
            s = (Session *)(uintptr_t)w.ref;
            s->spill_rec = 0;
            if (s->pend_side && pend_read_back(sm, rp, s, 0) != 0) return -1;
        } else if (w.kind == WR_COLD) {
            if (!(s = read_group(sm, rp, NULL))) return -1;
            s->refs++;
            if (s->pend_side && pend_read_back(sm, rp, s, 1) != 0) return -1;
        } else if (w.kind == WR_SREF) {
            uint64_t at = w.ref & ((1ull << WR_SREF_SHIFT) - 1);
            size_t len = (size_t)(w.ref >> WR_SREF_SHIFT);
            if (side_load(sm, rp, at, len) != 0 || !(s = read_group(sm, rp, &at))) return -1;
            side_count(sp, at - len, len, -1);
            s->refs++;
            if (s->pend_side && pend_read_back(sm, rp, s, 1) != 0) return -1;
        } else {
            return sim_fail(sm, "internal: admission queue spill file of replica %d: record kind %d", rp->id, w.kind);
        }
        Turn *q = turn_from_rec(sm, &w, s);
        if (!q) return -1;
        sp->n--;
        if (ring_push(sm, &rp->qh, q) != 0) return -1;
    }
    if (sp->n == 0) { /* the files' space is used again */
        punch(sp->f, sp->punched, sp->wr);
        punch(sp->side, 0, sp->side_wr);
        if (sp->side_live) memset(sp->side_live, 0, sp->side_regions * sizeof *sp->side_live);
        sp->rd = sp->wr = sp->buf_base = sp->buf_n = sp->side_wr = sp->sbuf_n = sp->rbuf_base = sp->rbuf_n = sp->punched = 0;
        sp->tbuf_base = sp->tbuf_n = 0;
        sp->pn = 0; /* none: each was written before the read that reached it */
    } else if (sp->rd - sp->punched >= WAITQ_REGION) { /* what was read goes back to the disk */
        uint64_t to = sp->rd / WAITQ_REGION * WAITQ_REGION;
        punch(sp->f, sp->punched, to);
        sp->punched = to;
    }
    return 0;
}

/* ------------------------------------------------------------------ the FIFO */

int waitq_push(Sim *sm, Replica *rp, Turn *t)
{
    if (ring_push(sm, &rp->qt, t) != 0) return -1;
    rp->q_len++;
    if (rp->sp.n == 0) {
        while (rp->qt.n && rp->qh.n < rp->q_bound)
            if (ring_push(sm, &rp->qh, ring_pop(&rp->qt)) != 0) return -1;
    }
    if (rp->qt.n >= 2 * rp->q_bound && !rp->sp.off) return spill_batch(sm, rp);
    return 0;
}

Turn *waitq_head(Sim *sm, Replica *rp)
{
    if (!rp->q_len) return NULL;
    if (!rp->qh.n) {
        if (rp->sp.n > 0) {
            if (unspill(sm, rp) != 0) return NULL;
        } else {
            while (rp->qt.n)
                if (ring_push(sm, &rp->qh, ring_pop(&rp->qt)) != 0) return NULL;
        }
    }
    return rp->qh.n ? turn_ring_at(&rp->qh, 0) : NULL;
}

void waitq_pop(Replica *rp)
{
    ring_pop(&rp->qh);
    rp->q_len--;
}

void waitq_free(Sim *sm, Replica *rp)
{
    while (rp->qh.n) turn_free(sm, ring_pop(&rp->qh));
    while (rp->qt.n) turn_free(sm, ring_pop(&rp->qt));
    free(rp->qh.v);
    free(rp->qt.v);
    free(rp->sp.buf);
    free(rp->sp.sbuf);
    free(rp->sp.rbuf);
    free(rp->sp.tbuf);
    free(rp->sp.side_live);
    free(rp->sp.pbuf);
    if (rp->sp.f) fclose(rp->sp.f);
    if (rp->sp.side) fclose(rp->sp.side);
    memset(&rp->qh, 0, sizeof rp->qh);
    memset(&rp->qt, 0, sizeof rp->qt);
    memset(&rp->sp, 0, sizeof rp->sp);
    rp->q_len = 0;
}
