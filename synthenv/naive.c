/* The benchmark's reference (synthenv/naive.py, synthenv/bench.py): a careful plain interpreter
 * of raw BF tokens. No compiler: a precomputed bracket map (docs/semantics.md §1: unmatched brackets are one-step
 * no-ops), one command per step, cases in order; with early_abort, stop at the first failing
 * case (as PQT's scorer and the `cpu` pipeline do). Every dialect (synthenv/dialect.py): under
 * EDGE_WRAP the tape is a ring of `ring` cells (high then bounds the cells to clear). */
#include <omp.h>

#include "common.h"

static i32 naive_prepare(const long long *tokens, i64 length, i8 *prog, i32 *partner, i32 *stack) {
    i32 len = 0, depth = 0, balanced = 1;
    while (len < length && tokens[len] > 0 && tokens[len] <= T_IN) {
        prog[len] = (i8)tokens[len];
        partner[len] = -1;
        len++;
    }
    for (i32 i = 0; i < len; i++) {
        if (prog[i] == T_OPEN) {
            stack[depth++] = i;
        } else if (prog[i] == T_CLOSE) {
            if (depth == 0) { balanced = 0; continue; }
            i32 j = stack[--depth];
            partner[i] = j;
            partner[j] = i;
        }
    }
    if (depth) balanced = 0;
    prog[len] = T_EOS;
    return balanced ? len : -1 - len;
}

static i32 naive_case(const i8 *prog, const i32 *partner, const i32 *inputs, i32 input_len, i32 base,
                      i32 max_steps, syn_dialect d, i32 *tape, i32 *out, i32 num_outputs, i32 *out_len,
                      i32 *steps_out) {
    i32 pc = 0, ptr = 0, high = 0, next_in = 0, nout = 0, kept = 0, steps = 0, status = ST_OK;
    const i32 ring = d.edge == EDGE_WRAP ? d.ring : 0;
    for (;;) {
        switch (prog[pc]) {
        case T_EOS: goto done;
        case T_RIGHT:
            if (++ptr == ring) ptr = 0;
            if (ptr > high) high = ptr;
            break;
        case T_LEFT:
            if (ptr > 0) ptr--;
            else if (d.edge == EDGE_WRAP) ptr = high = ring - 1;
            else if (d.edge == EDGE_ERROR) { steps++; status = ST_LEFT_EDGE; nout = 0; goto done; }
            break;
        case T_INC: tape[ptr] = tape[ptr] == base - 1 ? 0 : tape[ptr] + 1; break;
        case T_DEC: tape[ptr] = tape[ptr] == 0 ? base - 1 : tape[ptr] - 1; break;
        case T_OPEN: if (tape[ptr] == 0 && partner[pc] >= 0) pc = partner[pc]; break;
        case T_CLOSE: if (tape[ptr] != 0 && partner[pc] >= 0) pc = partner[pc]; break;
        case T_OUT:
            if (nout < num_outputs) out[nout] = tape[ptr];
            nout++;
            if (!SYN_IS_SPACE(tape[ptr])) kept = nout;
            break;
        case T_IN:
            if (next_in < input_len) tape[ptr] = inputs[next_in++];
            else if (d.eof != EOF_UNCHANGED) tape[ptr] = d.eof == EOF_MAX ? base - 1 : 0;
            break;
        }
        pc++;
        if (++steps >= max_steps) {
            status = ST_STEP_LIMIT;
            nout = 0; /* a failed case exposes only its status and step count */
            break;
        }
    }
done:
    if (status == ST_OK && d.cmp == CMP_RSTRIP) nout = kept;
    memset(tape, 0, sizeof(i32) * (size_t)(high + 1));
    for (i32 j = nout; j < num_outputs; j++) out[j] = 0;
    *out_len = nout;
    *steps_out = steps;
    return status;
}

int synthenv_naive(const long long *tokens, i64 num_programs, i64 length, const i32 *inputs,
                   const i32 *input_lengths, i64 num_cases, i64 input_width, i32 base, i32 max_steps,
                   i32 strict_syntax, i32 edge, i32 eof, i32 cmp, i32 ring, i32 early_abort, i32 *outputs, i32 *output_lengths, i8 *status, i32 *steps,
                   i64 num_outputs, i32 num_threads) {
    int failed = 0;
    const syn_dialect dialect = {edge, eof, cmp, ring};
    const i32 cells = edge == EDGE_WRAP && ring > max_steps ? ring : max_steps;
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel num_threads(num_threads) reduction(| : failed)
    {
        i32 *tape = (i32 *)calloc((size_t)cells, sizeof(i32));
        i8 *prog = (i8 *)malloc((size_t)length + 1);
        i32 *partner = (i32 *)malloc(sizeof(i32) * ((size_t)length + 1));
        i32 *stack = (i32 *)malloc(sizeof(i32) * ((size_t)length + 1));
        if (!tape || !prog || !partner || !stack) failed = 1;
#pragma omp for schedule(dynamic, 16)
        for (i64 n = 0; n < num_programs; n++) {
            if (failed) continue;
            i32 len = naive_prepare(tokens + n * length, length, prog, partner, stack);
            int stop = 0;
            for (i64 k = 0; k < num_cases; k++) {
                const i64 item = n * num_cases + k;
                i32 *out = outputs + item * num_outputs;
                if (stop) {
                    syn_skip_case(out, (i32)num_outputs, output_lengths + item, steps + item, status + item);
                } else if (len < 0 && strict_syntax) {
                    syn_skip_case(out, (i32)num_outputs, output_lengths + item, steps + item, status + item);
                    status[item] = ST_SYNTAX_ERROR;
                    stop = early_abort;
                } else {
                    i32 s = naive_case(prog, partner, inputs + k * input_width, input_lengths[k], base, max_steps,
                                       dialect, tape, out, (i32)num_outputs, output_lengths + item, steps + item);
                    status[item] = (i8)s;
                    stop = early_abort && s != ST_OK;
                }
            }
        }
        free(tape);
        free(prog);
        free(partner);
        free(stack);
    }
    return failed ? -1 : 0;
}

