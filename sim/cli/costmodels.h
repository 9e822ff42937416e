/* costmodels.h — the cost stores committed under results/costmodels/ (SQL dumps, compiled into the
 * binary): `kvsim list costmodels`, and `--costs measured:NAME` / `--costs spec:NAME`, which load
 * the dump results/costmodels/measured-NAME.sql (spec-NAME.sql) into a private in-memory store.
 * Responsible for: naming the committed stores, loading one by name (an unknown name refused with
 * the list of names), describing each. Not responsible for: checking that a store fits the run's
 * GPU and model (cost_model_load_db refuses a store without curves for them, naming both).
 */
#ifndef KV_COSTMODELS_H
#define KV_COSTMODELS_H

#include <stdio.h>

#include "sim/base/util.h"

/* Register the opener of the committed stores with the cost store layer (store_open_costs). */
void costmodels_install(void);
/* One entry per committed store: name, backend, GPU, model, dtype, TP degrees, source, and the ops
 * taken from the catalog's spec roofline instead of measured. */
int costmodels_list(FILE *out, KvErr *e);

#endif
