/* ops.h — the operations of the cost model (docs/formats.md "Cost store", docs/model.md "The cost
 * contract"), shared by kvcal (which measures them) and kvsim (which reads them). Each op is a
 * function of up to three integer shape parameters.
 *
 * | op             | p1            | p2                  | p3     | per                     |
 * |----------------|---------------|---------------------|--------|-------------------------|
 * | gemm_qkv       | tokens        | -                   | -      | layer, per GPU (TP)     |
 * | gemm_o         | tokens        | -                   | -      | layer, per GPU          |
 * | gemm_ffn_up    | tokens        | -                   | -      | layer (gate+up; MoE: router + routed experts) |
 * | gemm_ffn_down  | tokens        | -                   | -      | layer                   |
 * | gemm_kv_proj   | tokens        | -                   | -      | layer: hidden → K,V + RoPE on K |
 * | attn_prefill   | new tokens    | context tokens      | -      | layer: causal attention of new over context+new |
 * | attn_decode    | batch         | total context tokens| -      | layer: one decode step  |
 * | layer_prefill  | new tokens    | context tokens      | -      | a whole layer forward   |
 * | h2d, d2h       | bytes         | -                   | -      | pinned copy, one way    |
 * | h2d_bidir, d2h_bidir | bytes   | -                   | -      | that direction while the other is busy |
 * | ssd_read, ssd_write | bytes    | queue depth         | n_ssd  | O_DIRECT, striped       |
 * | net            | bytes         | -                   | -      | latency + bytes / bandwidth |
 * | quant, dequant | tokens        | -                   | -      | per layer, KV of `tokens` tokens |
 * | norm, act, rope| tokens        | -                   | -      | layer elementwise parts |
 * | allreduce      | tokens        | -                   | -      | layer: TP all-reduces of the activations (T > 1) |
 * | allgather      | tokens        | -                   | -      | layer: TP all-gather of a hidden state (T > 1) |
 *
 * Values are nanoseconds (median, p10, p90) over n repetitions.
 */
#ifndef KV_OPS_H
#define KV_OPS_H

typedef enum CostOp {
    OP_GEMM_QKV = 0,
    OP_GEMM_O,
    OP_GEMM_FFN_UP,
    OP_GEMM_FFN_DOWN,
    OP_GEMM_KV_PROJ,
    OP_ATTN_PREFILL,
    OP_ATTN_DECODE,
    OP_LAYER_PREFILL,
    OP_H2D,
    OP_D2H,
    OP_H2D_BIDIR,
    OP_D2H_BIDIR,
    OP_SSD_READ,
    OP_SSD_WRITE,
    OP_NET,
    OP_QUANT,
    OP_DEQUANT,
    OP_NORM,
    OP_ACT,
    OP_ROPE,
    OP_ALLREDUCE,
    OP_ALLGATHER,
    OP_COUNT
} CostOp;

/* "gemm_qkv", ... ; NULL for out of range */
const char *cost_op_name(CostOp op);
/* -1 when unknown */
int cost_op_parse(const char *name);
/* number of shape parameters the op uses (1..3) */
int cost_op_nparams(CostOp op);
/* bit d set: time never decreases along parameter d (work axes: tokens, context, batch, bytes);
 * queue depth and drive count are not work axes (more of them is faster) */
int cost_op_monotone_axes(CostOp op);
/* whether the op depends on the model (compute ops) or only on the machine (IO ops) */
int cost_op_is_io(CostOp op);

#endif
