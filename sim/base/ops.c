/* ops.c — op names and arity; see ops.h. */
#include "sim/base/ops.h"

#include <string.h>

static const struct {
    const char *name;
    int nparams;
    int io;
} g_ops[OP_COUNT] = {
    [OP_GEMM_QKV] = {"gemm_qkv", 1, 0},
    [OP_GEMM_O] = {"gemm_o", 1, 0},
    [OP_GEMM_FFN_UP] = {"gemm_ffn_up", 1, 0},
    [OP_GEMM_FFN_DOWN] = {"gemm_ffn_down", 1, 0},
    [OP_GEMM_KV_PROJ] = {"gemm_kv_proj", 1, 0},
    [OP_ATTN_PREFILL] = {"attn_prefill", 2, 0},
    [OP_ATTN_DECODE] = {"attn_decode", 2, 0},
    [OP_LAYER_PREFILL] = {"layer_prefill", 2, 0},
    [OP_H2D] = {"h2d", 1, 1},
    [OP_D2H] = {"d2h", 1, 1},
    [OP_H2D_BIDIR] = {"h2d_bidir", 1, 1},
    [OP_D2H_BIDIR] = {"d2h_bidir", 1, 1},
    [OP_SSD_READ] = {"ssd_read", 3, 1},
    [OP_SSD_WRITE] = {"ssd_write", 3, 1},
    [OP_NET] = {"net", 1, 1},
    [OP_QUANT] = {"quant", 1, 0},
    [OP_DEQUANT] = {"dequant", 1, 0},
    [OP_NORM] = {"norm", 1, 0},
    [OP_ACT] = {"act", 1, 0},
    [OP_ROPE] = {"rope", 1, 0},
    [OP_ALLREDUCE] = {"allreduce", 1, 0},
    [OP_ALLGATHER] = {"allgather", 1, 0},
};

const char *cost_op_name(CostOp op) { return (unsigned)op < OP_COUNT ? g_ops[op].name : NULL; }

int cost_op_parse(const char *name)
{
    for (int i = 0; i < OP_COUNT; i++)
        if (strcmp(g_ops[i].name, name) == 0) return i;
    return -1;
}

int cost_op_nparams(CostOp op) { return (unsigned)op < OP_COUNT ? g_ops[op].nparams : 0; }
int cost_op_is_io(CostOp op) { return (unsigned)op < OP_COUNT ? g_ops[op].io : 0; }

int cost_op_monotone_axes(CostOp op)
{
    if (op == OP_SSD_READ || op == OP_SSD_WRITE) return 1; /* bytes only */
    return (1 << cost_op_nparams(op)) - 1;
}
