/* channel.h — IO channels: servers that move transfer units one at a time (per stage H2D and D2H,
 * the host's SSD array, the NIC in and out of the remote store).
 *
 * Responsible for: each channel's two queues (restoration loads before background saves and spills,
 * FIFO within a class; among loads, one that an iteration in flight waits for goes first, else the
 * policy's io_pick chooses), serving the unit at the head for bytes / rate + latency, the fluid
 * both-ways model (H2D and D2H of one link run at the catalog's bidirectional rates while the other
 * direction is busy: the rate of the unit in flight changes and its completion event is re-armed —
 * the channel's event queue timer, so the event it replaces is cancelled, not popped and ignored),
 * the SSD array's striping (a transfer of fewer pieces than drives keeps only some drives busy),
 * the SSD array's mixing penalty (the unit in flight runs at mixed_eff of its rate while a unit of
 * the other direction waits: its completion event is re-armed when one arrives),
 * moving a unit along its chain of hops and, after the last hop, calling the unit's own completion
 * callback u->done(sm, u) — the way redis ae calls a time event's timeProc: a channel knows no
 * consumer; busy time and bytes per channel.
 * Not responsible for: what a unit is for (restore.c, tier.c make units and handle their done),
 * byte counters of the results (metrics_on_unit), the unit free list (unit_new / unit_free here
 * are allocation only).
 * Invariants (SIM_CHECK, always on): a channel serves one unit at a time (a completion event finds
 * the unit it armed; a unit starts only on an idle channel); every unit is served once per hop (a
 * unit is in at most one queue, is never enqueued while queued or in service, and is done once:
 * a freed unit is never served).
 * A queued layer load may be a run of consecutive layers of one request's part (ch_extend_run):
 * the queue then holds one entry for them, counted as that many units everywhere (nhi, hi_loads,
 * the FIFO order, the stalled-load scan), its first layer split off when it is picked.
 * Complexity: enqueue O(1); start O(1), or O(waiting entries) (≤ 64 shown to io_pick) when loads
 * wait; rerate O(1).
 */
#ifndef KV_CHANNEL_H
#define KV_CHANNEL_H

#include <stdint.h>

#include "sim/engine/evq.h"
#include "sim/engine/sim.h"

struct Sim;
struct Request;
struct Session;

/* channel kinds (CH_H2D ... CH_COUNT) and their rows are sim.h's: results name them too */
/* transfer classes: loads are served before saves and spills */
enum { U_LOAD, U_LOAD_TOK, U_SAVE, U_SPILL };
/* a unit's place in its life (checked: served once) */
enum { US_FREE = 0, US_NEW, US_QUEUED, US_SERVING };

typedef struct Unit Unit;
typedef struct Channel Channel;
/* called once, after the unit's last hop; the callback may free or reuse the unit */
typedef void (*UnitDoneFn)(struct Sim *sm, Unit *u);

struct Unit {
    Unit *next;
    UnitDoneFn done;
    struct Request *r;         /* loads: the restoring request */
    struct Session *s;         /* saves and spills: the session */
    int kind, layer, stage, hop, nhops, state;
    int run_left;              /* a run in a load queue (ch_extend_run): layers layer + 1 … layer + run_left follow */
    int tier, tier_from;       /* spills: the destination tier and the one spilled from */
    int read_hops;             /* saves and spills: their first hops that read (a spill out of the SSD array) */
    int64_t upto;              /* saves: context position covered once this unit lands; token loads: slot */
    double stripe_bytes;       /* SSD layout of this state (0: the array's stripe) */
    Channel *chain[3];         /* the channels of its hops, in order */
    double bytes[3];
    int64_t enq_ns;
    int64_t wait_pos;          /* loads parked on a session: the position they wait for (D2H, or landing: wait_land) */
    int wait_land;             /* parked until the save has landed in its tier (a store without DRAM: no host copy to read) */
    uint64_t sched_id;         /* schedule_out.c: the unit's id in the schedule written (0: none) */
};

struct Channel {
    const char *name;
    int kind, stage;
    double rate, rate_bidir, rate_write; /* bytes per ns */
    int n_drives;                        /* SSD array: drives striped in stripe_bytes pieces */
    double stripe_bytes;
    double mixed_eff;                    /* SSD array: the share of its rate a transfer keeps while one of the other
                                          * direction waits (the catalog's mixed_efficiency; 1: taking turns) */
    int64_t latency_ns, latency_write_ns; /* per transfer: loads, and saves and spills (an SSD's write latency) */
    Channel *peer;                       /* the other direction of the same link */
    Unit *hi_head, *hi_tail, *lo_head, *lo_tail;
    int nhi, nlo;
    int nlo_read;                        /* of the nlo: saves and spills whose hop here reads (a spill out of this tier) */
    Unit *cur;
    double cur_left, cur_rate;
    int64_t cur_since;
    uint64_t ev_seq;                     /* the completion event armed for cur */
    EvTimer tm;                          /* that event (re-armed in place at a rate change: evq.h) */
    double busy_ns, bytes;
    int64_t busy_since;
};

static inline const char *ch_kind_name(int kind) { return sim_channel_rows[kind].name; }
static inline int ch_kind_per_stage(int kind) { return sim_channel_rows[kind].per_stage; }

void ch_init(Channel *c, int kind, int stage, double rate_bytes_per_s, double bidir_bytes_per_s, int64_t latency_ns);
/* whether u's current hop reads (a load, or a spill's hop out of the tier it leaves) rather than writes */
static inline int ch_unit_reads(const Unit *u) { return u->kind == U_LOAD || u->kind == U_LOAD_TOK || u->hop < u->read_hops; }
/* the per-transfer latency u pays on c (a read's, or a write's) */
int64_t ch_unit_latency_ns(const Channel *c, const Unit *u);
/* put u (its next hop, u->chain[u->hop]) in its queue, and start the channel if it is idle */
void ch_enqueue(struct Sim *sm, Unit *u);
/* A run: u, a layer load queued at the tail of its channel's load queue by the admission
 * now going on, stands for the next layer too — one more unit exactly like u but for its layer
 * (u's last + 1), as ch_enqueue would append it: counted in the queue (nhi, the request's
 * hi_loads), served as a unit of its own when the run reaches it (pick_load splits the run's first
 * layer off). 1: done; 0: not possible here (not the tail, not queued now, not the next layer, the
 * channel idle; a policy's io_pick looks at the queue's units, or a schedule lists each unit made)
 * — the caller enqueues that unit itself. O(1). */
int ch_extend_run(struct Sim *sm, Unit *u, int layer);
/* ch_extend_run's two halves: whether u can take `layer` next (as above), and u taking the next n
 * layers — for the caller that has checked ch_run_open and appends nothing else to that queue
 * meanwhile (n extensions in a row, each of which ch_run_open would allow: the tail stays u). */
int ch_run_open(const struct Sim *sm, const Unit *u, int layer);
void ch_run_extend(struct Sim *sm, Unit *u, int n);
/* the completion event of c's unit in flight (seq: the event's sequence number; stale ones ignored) */
void ch_on_event(struct Sim *sm, Channel *c, uint64_t seq);
/* free every unit c holds (teardown) */
void ch_free_units(Channel *c);

/* units: a free list on the Sim */
Unit *unit_new(struct Sim *sm);
/* a new unit, a copy of tmpl (state US_NEW, not linked) */
Unit *unit_new_from(struct Sim *sm, const Unit *tmpl);
void unit_free(struct Sim *sm, Unit *u);

#endif
