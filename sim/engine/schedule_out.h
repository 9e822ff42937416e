/* schedule_out.h — the schedule of a run as JSON lines (kvsim run --emit-schedule FILE): what the
 * engine decided, iteration by iteration and unit by unit, with its predicted times, so that
 * kvcal execute can replay it on real kernels and real files (docs/formats.md "Schedule").
 *
 * Responsible for: one line per record, written as the run goes —
 *   header    the model's shapes, the policy, the run's per-token byte sizes;
 *   request   at admission: the turn, its restoration plan (per-layer modes, recompute tokens,
 *             layer-wise tokens, token-wise chunks), release and admission times;
 *   unit      after a restoration load's last hop: kind, layer, stage, token range, tier, the file
 *             and offset of the session's saved state it reads, each hop's channel, bytes, start and
 *             end, and what made it ready ("after": a release, a unit, an iteration);
 *   iter      at an iteration's end: its items (decode / recompute / prefill with tokens, context,
 *             layer-wise flag), per layer the start, end, the restoration work it carries (recompute
 *             rows, projections, dequantizations) and the load units it waited for, and what made it
 *             start ("after");
 *   done      at a request's end: release, admission, restored, first token, last token;
 *   end       the run ended (ok or not).
 * Not responsible for: any decision (it only observes: the engine's results are byte-identical with
 * it on or off), saves and spills (not recorded: a replay reads the state they wrote, files it
 * prepares itself), replaying (calibrate/schedule.c reads it, calibrate/execute.c runs it).
 * Invariants: off (no path set) every hook is one NULL test in the engine; the file is written to a
 * temp file beside the path and renamed into place only when the run succeeded and every byte was
 * written (util.h KvAtomicFile), so the path never holds part of a schedule; unit ids are 1, 2, ... in
 * issue order (their lines come in landing order) and iteration ids 1, 2, ... in formation order; numbers are integers (ns, bytes,
 * tokens), so output is deterministic.
 * Complexity: O(1) per hook, except an iteration's waits: O(layers × layer-wise items × units of
 * the request) at its formation.
 */
#ifndef KV_SCHEDULE_OUT_H
#define KV_SCHEDULE_OUT_H

#include <stdint.h>

#include "sim/engine/engine_int.h"

typedef struct SchedOut SchedOut;

/* the path set by sim_schedule_set_path (sim.h); "" when none */
const char *sched_out_path(void);

/* engine.c: open the file and write the header (sm->sched set); -1 with the run's error on failure.
 * A no-op returning 0 when no path is set. */
int sched_out_open(Sim *sm);
/* engine.c: ok (the run succeeded): write the end record and rename the file into place; else remove
 * it (a failed run leaves no schedule). Frees. -1 with the run's error when the file could not be
 * written whole (a full disk): nothing is left at the path then either. */
int sched_out_close(Sim *sm, int ok);

/* restore.c: load unit u of r for tokens [lo, hi) (hidden: hidden states or boundary activations)
 * was created and is about to be sent or parked */
void sched_out_load(Sim *sm, Unit *u, int64_t lo, int64_t hi, int hidden);
/* restore.c: r was admitted and its plan started */
void sched_out_admit(Sim *sm, const Request *r);
/* channel.c: u's current hop on c ended (before it moves on); after its last hop the unit's line */
void sched_out_hop(Sim *sm, const Channel *c, const Unit *u);
/* engine_int.h sim_kick: rp will form an iteration because of what is happening now */
void sched_out_kick(Sim *sm, const Replica *rp);
/* iteration.c: rp formed an iteration (its items and layer_ns are set) */
void sched_out_iter_formed(Sim *sm, const Replica *rp);
/* walk.c: layer l of rp's iteration ran from start_ns to end_ns */
void sched_out_layer(Sim *sm, const Replica *rp, int l, int64_t start_ns, int64_t end_ns);
/* iteration.c: rp's iteration ends now (before its items' progress is applied) */
void sched_out_iter_done(Sim *sm, const Replica *rp);
/* lifecycle.c: r produced its last token */
void sched_out_request_done(Sim *sm, const Request *r);

#endif
