/* compilers/traditional.py's passes in C, one program per thread, for CPU tensors: the same
 * IR, bit for bit (tests/test_compiler.py checks ir.equal on random programs).
 * Two linear passes: (1) lex up to the first EOS and match brackets (PQT: unmatched ones become
 * one-step no-ops), noting at each `]` whether its loop is innermost (no bracket inside) and
 * counted (innermost, body of +-<> only, net move 0), with the body's entry-cell delta and
 * no-clamping guard accumulated on the way; (2) fold runs and emit ops with running sums,
 * then patch jump targets. Writes every element of `code` [N, L + 1, 5]; slots after the
 * last op are HALT (all zero). */
#include <omp.h>

#define SYNTHENV_LEX_TABLES /* token classes C_* and the syn_* lexing tables of tables.h */
#include "common.h"

typedef struct {
    i8 *cls;       /* [L] token class after matching */
    i8 *loop;      /* [L] at both brackets of a matched pair: 1 = innermost, 3 = also a counted loop */
    i32 *partner;  /* [L] matching bracket or -1 */
    i32 *delta;    /* [L] at a counted loop's `[`: the entry cell's change per iteration */
    i32 *guard;    /* [L] at a counted loop's `[`: lowest pointer at which the body never clamps */
    i32 *op_at;    /* [L] at a matched bracket: its op slot */
    i32 *stack;    /* [L] open brackets while matching */
} compile_scratch;

/* Random tokens make every data-dependent branch a coin flip, so the per-token work below is
 * table lookups and conditional moves; only brackets (and new ops) branch. */

/* Pass 1; returns the program's length (tokens before the first EOS). */
static i32 compile_match(const long long *tokens, i64 length, compile_scratch *w, i32 *balanced) {
    i32 len = 0, depth = 0, last_open = -1, clean = 0, offset = 0, low = 0, delta = 0;
    while (len < length && tokens[len] > 0 && tokens[len] <= T_IN) len++;
    *balanced = 1;
    for (i32 i = 0; i < len; i++) {
        const long long t = tokens[i];
        w->cls[i] = syn_token_class[t];
        /* offset, low, delta, clean: the body since the last `[` (its net move, lowest
         * offset, entry-cell delta, and whether it has no I/O) */
        offset += syn_move_delta[t];
        low = offset < low ? offset : low;
        delta += offset == 0 ? syn_add_delta[t] : 0;
        clean &= !syn_token_io[t];
        if (t == T_OPEN) {
            w->partner[i] = -1;
            w->loop[i] = 0;
            w->stack[depth++] = i;
            last_open = i;
            clean = 1, offset = low = delta = 0;
        } else if (t == T_CLOSE) {
            w->loop[i] = 0;
            if (depth == 0) {
                w->cls[i] = C_UNMATCHED;
                w->partner[i] = -1;
                *balanced = 0;
            } else {
                const i32 open = w->stack[--depth];
                const i32 counted = open == last_open && clean && offset == 0;
                w->partner[i] = open;
                w->partner[open] = i;
                w->loop[open] = w->loop[i] = (i8)((open == last_open) | counted << 1);
                w->delta[open] = delta;
                w->guard[open] = -low;
            }
            last_open = -1;
        }
    }
    for (i32 d = 0; d < depth; d++) w->cls[w->stack[d]] = C_UNMATCHED;
    if (depth) *balanced = 0;
    return len;
}

/* Pass 2: one op per run of a foldable class (+-, < or >, ., ,, unmatched brackets) or bracket.
 * While a run is open, ins[1] accumulates its arg and, for moves, ins[2] the deepest dip
 * below its start (turned into the floor in the fix-up). */
static i32 compile_emit(const long long *tokens, i32 len, compile_scratch *w, i32 *code) {
    i32 ops = -1, run = C_NONE, offset = 0, entry = 0, in_body = 0;
    long long run_token = 0; /* a run of moves keeps its direction (compilers/traditional.py) */
    i32 *ins = code - 5;
    for (i32 i = 0; i < len; i++) {
        const long long t = tokens[i];
        const i8 c = w->cls[i];
        const i32 bracket = c == C_OPEN || c == C_CLOSE;
        if (c != run || bracket || (c == C_MOVE && t != run_token)) { /* a new op */
            ops++;
            ins += 5;
            run = c;
            run_token = t;
            ins[0] = syn_class_op[c];
            ins[1] = ins[3] = ins[4] = 0;
            ins[2] = c == C_ADD && in_body ? offset - entry : 0; /* offset from the counted loop's entry */
            in_body &= c == C_ADD || c == C_MOVE;
            if (bracket) { /* the target is patched once every op has a slot */
                const i8 loop = w->loop[i];
                w->op_at[i] = ops;
                ins[1] = loop & 1;
                in_body = 0;
                if (loop & 2 && c == C_OPEN) {
                    ins[0] = OP_LOOP;
                    ins[1] = w->delta[i];
                    ins[2] = w->guard[i];
                    ins[3] = w->partner[i] - i - 1; /* + 1 below: raw steps per iteration, body + `]` */
                    in_body = 1;
                    entry = offset;
                }
            }
        }
        ins[3]++; /* raw steps */
        ins[1] += bracket ? 0 : (syn_move_delta[t] + syn_add_delta[t] + syn_token_io[t]);
        offset += syn_move_delta[t];
        ins[2] = c == C_MOVE && -ins[1] > ins[2] ? -ins[1] : ins[2];
    }
    for (i32 op = 0; op <= ops; op++) /* move floors: ptr' = max(ptr + net, net - lowest prefix) */
        code[5 * op + 2] += code[5 * op] == OP_MOVE ? code[5 * op + 1] : 0;
    for (i32 i = 0; i < len; i++)
        if (w->cls[i] == C_OPEN || w->cls[i] == C_CLOSE) code[5 * w->op_at[i] + 4] = w->op_at[w->partner[i]] + 1;
    return ops + 1;
}

static void compile_one(const long long *tokens, i64 length, compile_scratch *w, i32 *code, i32 *num_ops,
                        u8_t *balanced, i32 *length_out) {
    i32 ok, len = compile_match(tokens, length, w, &ok);
    i32 ops = compile_emit(tokens, len, w, code);
    memset(code + 5 * (i64)ops, 0, sizeof(i32) * 5 * (size_t)(length + 1 - ops)); /* HALT */
    *num_ops = ops;
    *balanced = (u8_t)ok;
    *length_out = len;
}

int synthenv_compile(const long long *tokens, i64 num_programs, i64 length, i32 *code, i32 *num_ops, u8_t *balanced,
                     i32 *lengths, i32 num_threads) {
    int failed = 0;
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel num_threads(num_threads) reduction(| : failed)
    {
        size_t n = (size_t)length + 1;
        compile_scratch w = {(i8 *)malloc(n), (i8 *)malloc(n), (i32 *)malloc(4 * n), (i32 *)malloc(4 * n),
                             (i32 *)malloc(4 * n), (i32 *)malloc(4 * n), (i32 *)malloc(4 * n)};
        if (!w.cls || !w.loop || !w.partner || !w.delta || !w.guard || !w.op_at || !w.stack) failed = 1;
#pragma omp for schedule(static)
        for (i64 p = 0; p < num_programs; p++) {
            if (failed) continue;
            compile_one(tokens + p * length, length, &w, code + p * (length + 1) * 5, num_ops + p, balanced + p,
                        lengths + p);
        }
        free(w.cls);
        free(w.loop);
        free(w.partner);
        free(w.delta);
        free(w.guard);
        free(w.op_at);
        free(w.stack);
    }
    return failed ? -1 : 0;
}

/* synthenv.language.canonical_programs for int64 CPU rows: each row's tokens up to its first id
 * outside 1..8 (EOS or out of range), then EOS. One pass, one row per iteration (program mode's
 * step reads every action through it). */
void synthenv_canonical_programs(const long long *tokens, i64 n, i64 length, long long *out, int num_threads) {
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (i64 r = 0; r < n; r++) {
        const long long *row = tokens + r * length;
        long long *dst = out + r * length;
        i64 j = 0;
        for (; j < length && row[j] > 0 && row[j] <= T_IN; j++) dst[j] = row[j];
        for (; j < length; j++) dst[j] = 0;
    }
}

/* compilers.traditional.drop_unmatched_brackets for int64 CPU rows: each row's program (its tokens up to the first
 * id outside 1..8) without its unmatched brackets (PQT's rule: a `]` with no open `[`, a `[` never closed), then
 * EOS. stack: n_threads x length scratch. */
void synthenv_drop_unmatched(const long long *tokens, i64 n, i64 length, long long *out, int num_threads) {
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel num_threads(num_threads)
    {
        i32 *stack = (i32 *)malloc(sizeof(i32) * (size_t)(length + 1));
        u8_t *drop = (u8_t *)malloc((size_t)(length + 1));
#pragma omp for schedule(static)
        for (i64 r = 0; r < n; r++) {
            const long long *row = tokens + r * length;
            long long *dst = out + r * length;
            i64 len = 0, depth = 0, j = 0;
            if (!stack || !drop) { /* no scratch: the program as it is, still canonical */
                for (; j < length && row[j] > 0 && row[j] <= T_IN; j++) dst[j] = row[j];
                for (; j < length; j++) dst[j] = 0;
                continue;
            }
            while (len < length && row[len] > 0 && row[len] <= T_IN) len++;
            for (i64 i = 0; i < len; i++) {
                drop[i] = 0;
                if (row[i] == T_OPEN) stack[depth++] = (i32)i;
                else if (row[i] == T_CLOSE) {
                    if (depth) depth--;
                    else drop[i] = 1;
                }
            }
            for (i64 d = 0; d < depth; d++) drop[stack[d]] = 1;
            for (i64 i = 0; i < len; i++)
                if (!drop[i]) dst[j++] = row[i];
            for (; j < length; j++) dst[j] = 0;
        }
        free(stack);
        free(drop);
    }
}
