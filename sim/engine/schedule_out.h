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
 * Invariants: off (no path set) every hook is one NULL test in the engine (Sim.observer); the file is written to a
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

/* engine.c: open the file and write the header (sm->sched and sm->observer set); -1 with the run's error on failure.
 * A no-op returning 0 when no path is set. */
int sched_out_open(Sim *sm);
/* engine.c: ok (the run succeeded): write the end record and rename the file into place; else remove
 * it (a failed run leaves no schedule). Frees. -1 with the run's error when the file could not be
 * written whole (a full disk): nothing is left at the path then either. */
int sched_out_close(Sim *sm, int ok);

/* The records are written by hooks called through the run's observer (engine_int.h SimObserver,
 * Sim.observer, set by sched_out_open): restore.c (a load unit made, a request admitted), channel.c (a
 * hop ended), sim_kick (an iteration will be formed), iteration.c (formed, ends), walk.c (a layer
 * ran), lifecycle.c (a request's last token). */

#endif
