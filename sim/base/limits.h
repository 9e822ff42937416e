/* limits.h — the simulator's size limits, defined once for every layer that sizes an array by them.
 *
 * Responsible for: the most layers a model may have and the most pipeline stages a replica may be
 * cut into. The engine refuses a model or a layout past them before anything runs (setup.c,
 * config.c), so every array sized here holds what a run can index; the users of each size assert it
 * where they size their arrays.
 * Not responsible for: checking a configuration (the engine's setup does).
 */
#ifndef KV_LIMITS_H
#define KV_LIMITS_H

#define KV_MAX_LAYERS 256 /* layers of a model */
#define KV_MAX_STAGES 16  /* pipeline stages of a replica */

#endif
