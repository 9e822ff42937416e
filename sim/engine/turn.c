/* turn.c — the compact record of a turn not admitted yet, and the run's pool of them.
 *
 * Responsible for: Turn allocation from slabs of TURN_SLAB records with a free list (no per-record
 * malloc header), and freeing every slab at the end of a run. A Turn stands for a request from the
 * moment it is read from the trace (pending in its session's list, or waiting for its arrival or
 * release event) until it is admitted (lifecycle.c's admit_queue makes the full Request then) or
 * dropped; it holds what those stages read and nothing else (sizeof(Turn) is 56 bytes, so a queued
 * turn costs 64 bytes with its slot in the admission ring).
 * Not responsible for: what a turn means (lifecycle.c), sessions (session.c).
 * Invariants: a Turn is in exactly one place (a session's pending list, one event, or one queue
 * slot) or on the free list; the pool only grows (its peak is the most turns alive at once).
 * Complexity: O(1) per alloc and free; memory 56 bytes × peak live turns + one slab.
 */
#include <stdlib.h>

#include "sim/engine/engine_int.h"

#define TURN_SLAB 1024

typedef struct TurnSlab {
    struct TurnSlab *next;
    Turn t[TURN_SLAB];
} TurnSlab;

_Static_assert(sizeof(Turn) <= 56, "a queued turn must stay within 64 bytes with its queue slot");

Turn *turn_alloc(Sim *sm)
{
    if (!sm->turn_free) {
        TurnSlab *sl = malloc(sizeof *sl);
        if (!sl) {
            sim_fail(sm, "out of memory");
            return NULL;
        }
        sl->next = sm->turn_slabs;
        sm->turn_slabs = sl;
        for (int i = TURN_SLAB - 1; i >= 0; i--) {
            sl->t[i].next = sm->turn_free;
            sm->turn_free = &sl->t[i];
        }
    }
    Turn *t = sm->turn_free;
    sm->turn_free = t->next;
    t->next = NULL;
    return t;
}

void turn_free(Sim *sm, Turn *t)
{
    t->next = sm->turn_free;
    sm->turn_free = t;
}

void turn_pool_free(Sim *sm)
{
    while (sm->turn_slabs) {
        TurnSlab *nx = sm->turn_slabs->next;
        free(sm->turn_slabs);
        sm->turn_slabs = nx;
    }
    sm->turn_free = NULL;
}
