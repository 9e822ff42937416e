/* settings.h — the settings of an experiment, one row each (kvsim --set KEY=VALUE, config files'
 * "settings", summary.json's inputs). A row declares the SimConfig field (sim.h) and is the row of
 * config.c's table (parsing, range, default, help, JSON), so a new setting is its row here and the
 * code that reads it. Rows in the order --help, config files and summary.json list them.
 *
 * X(STR, key, field, size, default, flags, auto_word, help): char field[size]
 * X(NUM, key, CT_type, C type, field, default, min, max, flags, auto_word, help)
 * X(ENUM, key, C type, field, default, names, help): an index into names (config.c)
 * X(NUM_AT, key, CT_type, field, default, min, max, flags, auto_word, help): an element of an array a
 *   DECL row declares
 * X(DECL, C type, declarator): a field with no row of its own
 * X(MEMDEVS, size): the memory devices' settings KEY and n_KEY (sim/base/memdev.h)
 * default: in input syntax; auto_word: the input standing for "derived by sim_world_open" (stores -1
 * or ""), or NULL; CT_ types, flags and ranges: config.c. */
#ifndef KVSIM_SETTINGS_H
#define KVSIM_SETTINGS_H

#define SIM_SETTING_ROWS(X)                                                                                                   \
    /* the system */                                                                                                           \
    X(STR, "model", model, 64, "Llama-2-7B", KF_NONEMPTY, NULL,                                                                \
      "model name from the catalog (kvsim list models)")                                                                       \
    X(STR, "platform", platform, 64, "hcache-a100", KF_NONEMPTY, NULL,                                                         \
      "platform name from the catalog (kvsim list platforms)")                                                                 \
    X(STR, "dtype", dtype, 8, "fp16", KF_NONEMPTY, NULL,                                                                       \
      "weights/KV dtype: fp16, bf16, fp8, ...")                                                                                \
    X(NUM, "tp", CT_INT, int, tp, "1", 1, 1024, 0, NULL,                                                                       \
      "tensor-parallel GPUs per stage (tp × pp <= the platform's GPUs per node)")                                              \
    X(NUM, "pp", CT_INT, int, pp, "1", 1, SIM_MAX_STAGES, 0, NULL,                                                             \
      "pipeline stages per replica")                                                                                           \
    X(NUM, "replicas", CT_INT, int, replicas, "1", 1, 64, 0, NULL,                                                             \
      "model replicas, one node each (sessions pinned to one)")                                                                \
    X(ENUM, "router", SimRouter, router, "least-loaded", g_router_names,                                                       \
      "a new session's replica (it stays there): least-loaded (the fewest requests) or prefix (the longest "                   \
      "prefix of its first request in the replica's prefix cache, ties to the fewest requests; vLLM "                          \
      "production-stack and llm-d style)")                                                                                     \
    X(STR, "gpu", gpu, 64, "platform", 0, "platform",                                                                          \
      "GPU replacing the platform's (kvsim list gpus; 'platform': the platform's)")                                            \
    X(STR, "host_link", host_link, 64, "platform", 0, "platform",                                                              \
      "host link replacing the platform's GPU<->host link (kvsim list links; 'platform': the platform's)")                     \
    X(STR, "hardware_overlay", hardware_overlay, 4096, "none", 0, "none",                                                      \
      "hardware catalog overlay: a JSON file of GPUs, links, SSDs, NICs, platforms added or replaced by "                      \
      "name (--hardware)")                                                                                                     \
    X(STR, "models_overlay", models_overlay, 4096, "none", 0, "none",                                                          \
      "model catalog overlay: a JSON file of models added or replaced by name (--models)")                                     \
    /* engine */                                                                                                               \
    X(ENUM, "engine", SimEngine, engine, "vllm", g_engine_names,                                                               \
      "engine profile (sets the default iteration overhead)")                                                                  \
    X(NUM, "iter_overhead", CT_DUR, int64_t, iter_overhead_ns, "profile", 0, MAX_DUR, 0, "profile",                            \
      "host overhead per iteration, e.g. 2 ms ('profile': the engine profile's)")                                              \
    X(NUM, "token_budget", CT_I64, int64_t, token_budget, "512", 1, 1 << 20, 0, NULL,                                          \
      "tokens per iteration (chunked prefill)")                                                                                \
    X(NUM, "max_batch", CT_INT, int, max_batch, "256", 1, 1 << 20, 0, NULL,                                                    \
      "max requests in an iteration")                                                                                          \
    X(NUM, "restore_share", CT_REAL, double, restore_share, "1", 0, 1, KF_MIN_OPEN, NULL,                                      \
      "share of the token budget restoration compute may use, >= 1/token_budget (Cake's GPU availability)")                    \
    X(NUM, "mem_util", CT_REAL, double, mem_util, "0.9", 0, 1, KF_MIN_OPEN, NULL,                                              \
      "share of HBM used for weights + KV pool")                                                                               \
    X(NUM, "block_tokens", CT_INT, int, block_tokens, "16", 1, 1 << 16, 0, NULL,                                               \
      "KV block size in tokens")                                                                                               \
    X(NUM, "num_gpu_blocks", CT_I64, int64_t, num_gpu_blocks, "0", 0, 1e12, 0, NULL,                                           \
      "KV pool per replica in blocks of block_tokens (vLLM's num_gpu_blocks), replacing the pool from HBM × mem_util "         \
      "− weights; must fit there (mem_util still bounds it); 0: the pool from memory")                                         \
    X(ENUM, "alloc", SimAlloc, alloc, "ondemand", g_alloc_names,                                                               \
      "KV blocks: ondemand (vLLM: history + new input at admission, a block per block_tokens of decode, "                      \
      "preemption when the pool runs out) or reserve (the whole turn, output included, at admission; never "                   \
      "preempts)")                                                                                                             \
    X(ENUM, "preempt", SimPreempt, preempt, "recompute", g_preempt_names,                                                      \
      "alloc=ondemand: a preempted request's KV is freed and recomputed on re-admission (recompute, vLLM "                     \
      "v1) or copied to host DRAM and back (swap, vLLM v0's option)")                                                          \
    X(NUM, "block_watermark", CT_REAL, double, block_watermark, "0.01", 0, 0.5, 0, NULL,                                       \
      "alloc=ondemand: share of the KV pool's blocks left free when admitting (vLLM's watermark, 0.01)")                       \
    /* workload */                                                                                                             \
    X(STR, "trace", trace, 4096, "sharegpt4", KF_NONEMPTY, NULL,                                                               \
      "generator name (kvsim list traces) or trace file")                                                                      \
    X(ENUM, "trace_format", SimTraceFormat, trace_format, "auto", trace_format_names,                                          \
      "trace file format (generators: auto)")                                                                                  \
    X(NUM, "seed", CT_U64, uint64_t, seed, "1", 0, 18446744073709551615.0, 0, NULL,                                            \
      "random seed")                                                                                                           \
    X(NUM, "requests", CT_I64, int64_t, requests, "0", 0, 1e12, 0, NULL,                                                       \
      "stop after this many requests (0: all / 1000 for generators)")                                                          \
    X(NUM, "session_rate", CT_REAL, double, session_rate, "0", 0, 1e6, 0, NULL,                                                \
      "sessions per second (Poisson) where the trace has no timestamps (0: the trace's default: sharegpt4 "                    \
      "0.5, leval 0.1, swebench 0.080225, files 1)")                                                                           \
    X(NUM, "time_scale", CT_REAL, double, time_scale, "1", 0, 1e6, KF_MIN_OPEN, NULL,                                          \
      "multiply trace timestamps and think times (> 0; 0 is refused, not 'unscaled')")                                         \
    X(NUM, "think", CT_DUR, int64_t, think_ns, "0 s", 0, MAX_DUR, 0, NULL,                                                     \
      "think time between turns without timestamps (0: trace default: sharegpt4 30 s, leval 0, swebench "                      \
      "lognormal)")                                                                                                            \
    X(ENUM, "arrivals", SimArrivals, arrivals, "session", g_arrival_names,                                                     \
      "later turns without timestamps: session (closed loop per session: think after the previous turn "                       \
      "ended) or trace (open loop: think after the previous turn's arrival, the same times for every "                         \
      "policy; a turn arriving before its previous one ended waits: session_wait)")                                            \
    X(NUM, "concurrency", CT_INT, int, concurrency, "0", 0, 1000000, 0, NULL,                                                  \
      "closed loop of N clients, each running whole sessions: the next turn think after the previous one "                     \
      "ended, the next session at once; trace timestamps and session_rate unused (0: off; 1: batch-1 "                         \
      "harness)")                                                                                                              \
    X(NUM, "request_rate", CT_REAL, double, request_rate, "0", 0, 1e6, 0, NULL,                                                \
      "requests per second: every request (any turn) arrives by a gamma process, replacing the trace's "                       \
      "times (vLLM --request-rate; 0: off)")                                                                                   \
    X(NUM, "system_prompt_tokens", CT_I64, int64_t, system_prompt_tokens, "0", 0, 1 << 20, 0, NULL,                            \
      "tokens of each group's system prompt: shared-prefix (0: SGLang's 2048), swebench (0: its harness's 129), "              \
      "sharegpt4 and multiturn (0: none; else added to each session's first turn, its blocks shared by the group)")            \
    X(NUM, "prompt_groups", CT_INT, int, prompt_groups, "0", 0, 1 << 20, 0, NULL,                                              \
      "distinct system prompts, one per group of sessions, each session's group drawn uniformly: shared-prefix (0: "           \
      "SGLang's 64), sharegpt4 and multiturn with system_prompt_tokens (0: 1, shared by all)")                                 \
    X(NUM, "rounds", CT_INT, int, rounds, "0", 0, 1 << 16, 0, NULL,                                                            \
      "the multiturn generator: rounds per client session (0: its default, 10, as Mooncake's HiCache "                         \
      "benchmark runs bench_multiturn.py)")                                                                                    \
    X(NUM, "round_tokens", CT_I64, int64_t, round_tokens, "0", 0, 1 << 20, 0, NULL,                                            \
      "the multiturn generator: new input tokens per round, after the whole conversation so far (0: its "                      \
      "default, 2048)")                                                                                                        \
    X(NUM, "round_output_tokens", CT_I64, int64_t, round_output_tokens, "0", 0, 1 << 20, 0, NULL,                              \
      "the multiturn generator: output tokens per round (0: its default, 16)")                                                 \
    X(NUM, "burstiness", CT_REAL, double, burstiness, "1", 0, 1e6, KF_MIN_OPEN, NULL,                                          \
      "gamma shape of request_rate's gaps (vLLM --burstiness): 1 Poisson, < 1 burstier, > 1 more regular")                     \
    X(NUM, "warmup", CT_TRIM, SimTrim, warmup, "0", 0, 1e12, 0, NULL,                                                          \
      "leave the first N requests (e.g. 200) or the requests arriving in the first T (e.g. '300 s') out of "                   \
      "the request metrics (0: none)")                                                                                         \
    X(NUM, "cooldown", CT_TRIM, SimTrim, cooldown, "0", 0, 1e12, 0, NULL,                                                      \
      "leave the last N requests or those arriving in the last T of the arrivals out of the request "                          \
      "metrics (0: none)")                                                                                                     \
    X(NUM, "max_context", CT_I64, int64_t, max_context, "0", 0, 1 << 24, 0, NULL,                                              \
      "truncate history+new to this many tokens (0: model max)")                                                               \
    X(NUM, "promote", CT_BOOL, int, promote, "false", 0, 1, 0, NULL,                                                           \
      "a restoration that read a session's state from a lower tier moves it to the first (HiCache's copy "                     \
      "up to host memory)")                                                                                                    \
    X(NUM, "prefetch", CT_BOOL, int, prefetch, "false", 0, 1, 0, NULL,                                                         \
      "a session's state below the first tier is moved up to it ahead of its next turn's known arrival "                       \
      "(AttentionStore's scheduler-aware fetching)")                                                                           \
    X(NUM, "prefetch_lead", CT_DUR, int64_t, prefetch_lead_ns, "0 s", 0, MAX_DUR, 0, NULL,                                     \
      "prefetch: start this long before the arrival (0: the move's own time at its tier's read rate)")                         \
    X(NUM, "write_through", CT_BOOL, int, write_through, "false", 0, 1, 0, NULL,                                               \
      "a save that lands in a tier is copied in the background to every tier below it, so a demotion "                         \
      "writes nothing (false: write-back, a tier's state is written to the next one when it is demoted)")                      \
    X(NUM, "evict_each_turn", CT_BOOL, int, evict_each_turn, "false", 0, 1, 0, NULL,                                           \
      "drop every session's KV from HBM when its turn ends")                                                                   \
    X(NUM, "prefix_cache", CT_BOOL, int, prefix_cache, "true", 0, 1, 0, NULL,                                                  \
      "keep the KV blocks a trace names (Mooncake hash_ids) in an HBM prefix cache shared by sessions: a "                     \
      "request takes its longest cached prefix instead of computing it (vLLM's automatic prefix caching)")                     \
    X(NUM, "tier_dedup", CT_BOOL, int, tier_dedup, "true", 0, 1, 0, NULL,                                                      \
      "the tiers below HBM store a named block once per place, however many saved states hold it: saves "                      \
      "and spills skip the blocks a tier holds (false: every saved state is stored whole)")                                    \
    /* storage */                                                                                                              \
    X(ENUM, "store", SimStore, store, "auto", g_store_names,                                                                   \
      "saved-state tiers (auto: SSDs if any, else the remote store if any, else DRAM)")                                        \
    X(NUM, "dram", CT_SIZE, uint64_t, dram_bytes, "0 B", 0, 1e18, 0, NULL,                                                     \
      "host DRAM for saved state, e.g. 256 GB (0: the platform's)")                                                            \
    X(NUM, "remote_capacity", CT_SIZE, uint64_t, remote_bytes, "0 B", 0, 1e18, 0, NULL,                                        \
      "the remote store's capacity, shared by the replicas, e.g. 100 GB (0: the platform's; unlimited when "                   \
      "it gives none)")                                                                                                        \
    X(STR, "ssd", ssd, 64, "platform", 0, "platform",                                                                          \
      "SSD model of the array (kvsim list ssds; 'platform': the platform's)")                                                  \
    X(NUM, "n_ssd", CT_INT, int, n_ssd, "platform", 0, 1024, 0, "platform",                                                    \
      "SSDs in the array ('platform': the platform's)")                                                                        \
    X(NUM, "ssd_capacity", CT_SIZE, uint64_t, ssd_bytes, "0 B", 0, 1e18, 0, NULL,                                              \
      "the SSD tier's capacity per host, e.g. 100 GB (a cache on the array, as KVBM's DYN_KVBM_DISK_CACHE_GB; "                \
      "0: the drives' whole capacity)")                                                                                        \
    X(MEMDEVS, 64)                                                                                                             \
    X(STR, "nic", nic, 64, "platform", 0, "platform",                                                                          \
      "NIC to the remote store (kvsim list nics), by name or line rate, e.g. 10GbE or 100GbE ('platform': "                    \
      "the platform's; none)")                                                                                                 \
    X(NUM, "nic_per_stage", CT_BOOL, int, nic_per_stage, "false", 0, 1, 0, NULL,                                               \
      "a NIC to the remote store per pipeline stage (each stage's GPUs on their own node) instead of one "                     \
      "shared by the stages")                                                                                                  \
    X(NUM, "state_ttl", CT_DUR, int64_t, state_ttl_ns, "1 h", 0, MAX_DUR, 0, NULL,                                             \
      "drop saved state unused this long (0: never)")                                                                          \
    X(ENUM, "save_mode", SimSaveMode, save_mode, "policy", g_save_names,                                                       \
      "how state is saved: policy (each policy's own), turn, iteration (two-stage), direct")                                   \
    /* SLOs and classes */                                                                                                     \
    X(NUM, "slo_ttft", CT_DUR, int64_t, slo_ttft_ns, "1 s", 0, MAX_DUR, 0, NULL,                                               \
      "TTFT objective, e.g. 200 ms")                                                                                           \
    X(NUM, "slo_tbt", CT_DUR, int64_t, slo_tbt_ns, "100 ms", 0, MAX_DUR, 0, NULL,                                              \
      "mean TBT objective per request")                                                                                        \
    X(DECL, int64_t, class_edges[SIM_CLASSES - 1]) /* history tokens: short < e0 <= medium < e1 <= long */                     \
    X(NUM_AT, "class_short", CT_I64, class_edges[0], "2048", 0, 1 << 30, 0, NULL,                                              \
      "history tokens below which a request is 'short'")                                                                       \
    X(NUM_AT, "class_long", CT_I64, class_edges[1], "16384", 0, 1 << 30, 0, NULL,                                              \
      "history tokens from which a request is 'long' (>= class_short)")                                                        \
    /* cost model */                                                                                                           \
    X(STR, "costs", costs, 4096, "spec", KF_NONEMPTY, NULL,                                                                    \
      "cost model: 'spec' (roofline from the catalog) or a cost store file")                                                   \
    X(STR, "cost_device", cost_device, 128, "platform", 0, "platform",                                                         \
      "device name in the cost store ('platform': the platform's GPU)")                                                        \
    X(ENUM, "stack", SpecStack, stack, "auto", g_stack_names,                                                                  \
      "serving stack of the spec model: fa2 (vLLM 0.6, FlashAttention-2), fa3 (Hopper only), auto (fa3 on Hopper, else "    \
      "fa2); fitted to measured kernels (kvcal spec --explain): vllm-0.19 (RTXPRO6000, RTX4090), vidur (A100-80GB, H100-SXM)")

#endif
