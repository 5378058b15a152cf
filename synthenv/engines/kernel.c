/* synthenv's fused VM kernel: ONE source for the `native` engine (C + OpenMP, loaded with
 * ctypes) and the `cuda` engine (NVRTC through CuPy). The IR semantics are those of the
 * docstring of synthenv/ir.py; every line below that differs between the two builds sits
 * behind SYN_CUDA.
 *
 * Entry points (C build):  synthenv_run (IR engine, OpenMP over programs, each thread runs
 *   one program's K cases in order), synthenv_compile (compilers/traditional.py's passes,
 *   sequential per program, the same IR), synthenv_score (synthenv/scoring.py's reward, per
 *   program), synthenv_naive (the benchmark's reference: a plain interpreter of raw BF
 *   tokens, no compiler), synthenv_loop_iterations (for tests).
 * Entry point (CUDA build): synthenv_run_cuda (one thread per (program, case)).
 * Dispatch: computed goto (threaded code) under GCC/Clang, a switch elsewhere and on CUDA.
 * Built with -DSYNTHENV_DRIVER it is also a standalone executable (main() at the end) that
 * the sanitizer tests run under -fsanitize=address,undefined.
 */

#if defined(__CUDACC__) || defined(__CUDACC_RTC__)
#define SYN_CUDA 1
#define SYN_FN __device__ __forceinline__
#else
#include <stdlib.h>
#include <string.h>
#define SYN_FN static inline
#endif

typedef int i32;
typedef long long i64;
typedef signed char i8;
typedef unsigned char u8_t;

#if defined(SYN_CELL_U8)
typedef unsigned char cell_t; /* CUDA, base <= 256: 4x less tape memory */
#else
typedef i32 cell_t;
#endif

/* synthenv.ir.Op */
enum { OP_HALT = 0, OP_ADD, OP_MOVE, OP_OUT, OP_IN, OP_JZ, OP_JNZ, OP_NOP, OP_LOOP };
/* synthenv.language.Status */
enum { ST_OK = 0, ST_STEP_LIMIT = 1, ST_SYNTAX_ERROR = 2, ST_ABORTED = 3 };

/* Dynamic hang detection: first writes of one innermost-loop iteration (position, old value). */
#ifndef SYN_LOG
#define SYN_LOG 16
#endif
#define LOG_OFF (SYN_LOG + 1) /* not watching, or this iteration overflowed the log */

#define TAPE(i) tape[(i64)(i) * stride]

#if defined(__GNUC__) && !defined(SYN_CUDA) && !defined(SYN_NO_THREADED)
#define SYN_THREADED 1
#else
#define SYN_THREADED 0
#endif

/* (v + delta) mod base for cells in [0, base): one division only when it wraps far. */
SYN_FN i32 syn_wrap(i64 x, i32 base) {
    if ((unsigned long long)x < (unsigned long long)base) return (i32)x; /* 0 <= x < base */
    x %= base;
    return (i32)(x < 0 ? x + base : x);
}

/* Least t >= 1 with (v + t * d) mod base == 0, or 0 if there is none (a proven hang).
 * Solves t * d == -v (mod base) with the extended Euclidean algorithm; v in (0, base). */
SYN_FN i64 syn_iterations(i64 d, i64 v, i64 base) {
    d %= base;
    if (d < 0) d += base;
    if (d == 0) return 0;
    i64 r0 = base, r1 = d, s0 = 0, s1 = 1; /* invariant: r_i == s_i * d (mod base) */
    while (r1 != 0) {
        i64 q = r0 / r1, r = r0 - q * r1, s = s0 - q * s1;
        r0 = r1; r1 = r; s0 = s1; s1 = s;
    }
    i64 g = r0, need = base - v; /* s0 * d == g (mod base) */
    if (need % g != 0) return 0;
    i64 m = base / g;
    i64 inv = s0 % m;
    if (inv < 0) inv += m;
    i64 t = ((need / g) % m) * inv % m;
    return t == 0 ? m : t;
}

/* Run one IR program on one input. Writes the first num_outputs values to `out` (padding
 * with zeros), the output count and the raw step count; returns a Status. The tape must be
 * all zeros on entry (cells at tape[i * stride]); it is all zeros again on return. */
SYN_FN i32 syn_run_case(const i32 *code, const i32 *inputs, i32 input_len, i32 base, i32 max_steps,
                        cell_t *tape, i64 stride, i32 *out, i32 num_outputs, i32 *out_len, i32 *steps_out,
                        volatile i32 *abort_flag) {
    i32 pc = 0, ptr = 0, next_in = 0, nout = 0, high = 0, status;
    i64 steps = 0;
    /* hang watch: the iteration started at pc w_pc with pointer w_ptr and input position w_in */
    i32 log_n = LOG_OFF, w_pc = -1, w_ptr = 0, w_in = 0;
    i32 log_pos[SYN_LOG], log_old[SYN_LOG];
#ifdef SYN_CUDA
    i32 polls = 0;
#else
    (void)abort_flag;
#endif

#define CHARGE(c)                                   \
    do {                                            \
        steps += (c);                               \
        if (steps >= max_steps) goto fail;          \
    } while (0)
#define LOG_WRITE(pos, old)                                                  \
    do {                                                                     \
        if (log_n < LOG_OFF) {                                               \
            i32 j_ = 0;                                                      \
            while (j_ < log_n && log_pos[j_] != (pos)) j_++;                 \
            if (j_ == log_n) {                                               \
                if (log_n == SYN_LOG) log_n = LOG_OFF;                       \
                else { log_pos[log_n] = (pos); log_old[log_n] = (old); log_n++; } \
            }                                                                \
        }                                                                    \
    } while (0)
#define WATCH(start)                                \
    do {                                            \
        log_n = 0; w_pc = (start); w_ptr = ptr; w_in = next_in; \
    } while (0)

    const i32 *ins;
    i32 arg;
#if SYN_THREADED
    /* Threaded dispatch (GCC/Clang computed goto): one indirect jump per op, better predicted
     * than a shared switch. Ops outside 0..8 read as HALT. */
    static const void *const labels[16] = {&&op_halt, &&op_add, &&op_move, &&op_out, &&op_in, &&op_jz, &&op_jnz,
                                           &&op_nop, &&op_loop, &&op_halt, &&op_halt, &&op_halt, &&op_halt,
                                           &&op_halt, &&op_halt, &&op_halt};
#define OP(name, value) op_##name:
#define NEXT                                    \
    do {                                        \
        ins = code + 5 * (i64)pc;               \
        arg = ins[1];                           \
        goto *labels[ins[0] & 15];              \
    } while (0)
    NEXT;
#else
#define OP(name, value) case value:
#define NEXT continue
    for (;;) {
        ins = code + 5 * (i64)pc;
        arg = ins[1];
        switch (ins[0]) {
#endif
        OP(add, OP_ADD) {
            CHARGE(ins[3]);
            i32 old = (i32)TAPE(ptr);
            LOG_WRITE(ptr, old);
            TAPE(ptr) = (cell_t)syn_wrap((i64)old + arg, base);
            pc++;
            NEXT;
        }
        OP(move, OP_MOVE) {
            CHARGE(ins[3]);
            ptr += arg;
            if (ptr < ins[2]) ptr = ins[2]; /* `<` clamps at cell 0: the folded floor */
            if (ptr > high) high = ptr;
            pc++;
            NEXT;
        }
        OP(out, OP_OUT) {
            CHARGE(ins[3]);
            i32 v = (i32)TAPE(ptr), end = nout + arg, stop = end < num_outputs ? end : num_outputs;
            for (i32 j = nout; j < stop; j++) out[j] = v;
            nout = end;
            pc++;
            NEXT;
        }
        OP(in, OP_IN) {
            CHARGE(ins[3]);
            next_in += arg;
            i32 v = next_in - 1 < input_len ? inputs[next_in - 1] : 0; /* keep the last read */
            LOG_WRITE(ptr, (i32)TAPE(ptr));
            TAPE(ptr) = (cell_t)v;
            pc++;
            NEXT;
        }
        OP(jz, OP_JZ) {
            CHARGE(1);
            if (TAPE(ptr) == 0) {
                pc = ins[4];
                log_n = LOG_OFF;
            } else {
                pc++;
                if (arg == 1) WATCH(pc); else log_n = LOG_OFF;
            }
            NEXT;
        }
        OP(jnz, OP_JNZ) {
            CHARGE(1);
            if (TAPE(ptr) == 0) {
                pc++;
                log_n = LOG_OFF;
                NEXT;
            }
            if (ptr == w_ptr && log_n < LOG_OFF && arg == 1 && w_pc == ins[4] &&
                (next_in == w_in || w_in >= input_len)) {
                /* The iteration left pointer, input and every cell it wrote as they were:
                 * the next one is identical, forever (synthenv.ir, JZ/JNZ). */
                i32 j = 0;
                while (j < log_n && (i32)TAPE(log_pos[j]) == log_old[j]) j++;
                if (j == log_n) goto fail;
            }
#ifdef SYN_CUDA
            if (abort_flag && (++polls & 63) == 0 && *abort_flag) {
                status = ST_ABORTED;
                goto done;
            }
#endif
            pc = ins[4];
            if (arg == 1) WATCH(pc); else log_n = LOG_OFF;
            NEXT;
        }
        OP(nop, OP_NOP) {
            CHARGE(ins[3]);
            pc++;
            NEXT;
        }
        OP(loop, OP_LOOP) {
            i32 v = (i32)TAPE(ptr);
            if (v == 0) {
                CHARGE(1);
                pc = ins[4];
                log_n = LOG_OFF;
                NEXT;
            }
            if (ptr < ins[2]) { /* the body could clamp at cell 0: run it normally */
                CHARGE(1);
                pc++;
                WATCH(pc);
                NEXT;
            }
            i64 t = syn_iterations(arg, v, base);
            if (t == 0) goto fail; /* the entry cell never reaches 0 */
            CHARGE(1 + t * ins[3]);
            /* Walk the body once with multiplier t (ADDs at offsets; MOVEs have no effect). */
            for (i32 q = pc + 1;; q++) {
                const i32 *body = code + 5 * (i64)q;
                if (body[0] == OP_ADD) {
                    i32 at = ptr + body[2];
                    TAPE(at) = (cell_t)syn_wrap((i64)TAPE(at) + t * body[1], base);
                    if (at > high) high = at;
                } else if (body[0] == OP_JNZ || body[0] == OP_HALT) {
                    break;
                }
            }
            pc = ins[4];
            log_n = LOG_OFF;
            NEXT;
        }
#if SYN_THREADED
        op_halt:
#else
        default: /* OP_HALT (and any unknown op) */
#endif
            status = ST_OK; /* the program ends */
            goto done;
#if !SYN_THREADED
        }
    }
#endif
#undef OP
#undef NEXT
fail:
    steps = max_steps;
    status = ST_STEP_LIMIT;
done:
    for (i32 j = 0; j <= high; j++) TAPE(j) = 0;
    for (i32 j = nout < 0 ? 0 : nout; j < num_outputs; j++) out[j] = 0;
    *out_len = nout;
    *steps_out = (i32)steps;
    return status;
#undef CHARGE
#undef LOG_WRITE
#undef WATCH
}

/* A case that never ran (early abort): zero outputs, ABORTED. */
SYN_FN void syn_skip_case(i32 *out, i32 num_outputs, i32 *out_len, i32 *steps, i8 *status) {
    for (i32 j = 0; j < num_outputs; j++) out[j] = 0;
    *out_len = 0;
    *steps = 0;
    *status = ST_ABORTED;
}

#ifdef SYN_CUDA
/* One thread per (program, case), grid-stride over items; thread slot s owns the tape
 * column tape[i * stride + s] (interleaved, so lanes at the same pointer coalesce). */
extern "C" __global__ void synthenv_run_cuda(
    const i32 *code, i64 num_programs, i64 num_slots, const i32 *inputs, const i32 *input_lengths,
    i64 num_cases, i64 input_width, i32 base, i32 max_steps, i32 early_abort, i32 *outputs,
    i32 *output_lengths, i8 *status, i32 *steps, i64 num_outputs, cell_t *tape, i64 stride, i32 *flags) {
    const i64 slot = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 total = num_programs * num_cases;
    for (i64 item = slot; item < total; item += stride) {
        const i64 n = item / num_cases, k = item % num_cases;
        volatile i32 *flag = early_abort ? (volatile i32 *)(flags + n) : 0;
        i32 *out = outputs + item * num_outputs;
        if (flag && *flag) {
            syn_skip_case(out, (i32)num_outputs, output_lengths + item, steps + item, status + item);
            continue;
        }
        i32 s = syn_run_case(code + n * num_slots * 5, inputs + k * input_width, input_lengths[k], base,
                             max_steps, tape + slot, stride, out, (i32)num_outputs, output_lengths + item,
                             steps + item, flag);
        status[item] = (i8)s;
        if (flag && s != ST_OK && s != ST_ABORTED) *flag = 1;
    }
}
#else

#include <omp.h>

/* Run N programs on K cases: OpenMP over programs, each program's cases in order, so early
 * abort is a `break`. Returns 0, or -1 if a tape could not be allocated. */
int synthenv_run(const i32 *code, i64 num_programs, i64 num_slots, const i32 *inputs, const i32 *input_lengths,
                 i64 num_cases, i64 input_width, i32 base, i32 max_steps, i32 early_abort, i32 *outputs,
                 i32 *output_lengths, i8 *status, i32 *steps, i64 num_outputs, i32 num_threads) {
    int failed = 0;
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel num_threads(num_threads) reduction(| : failed)
    {
        cell_t *tape = (cell_t *)calloc((size_t)max_steps, sizeof(cell_t));
        if (!tape) failed = 1;
#pragma omp for schedule(dynamic, 16)
        for (i64 n = 0; n < num_programs; n++) {
            if (!tape) continue;
            int stop = 0;
            for (i64 k = 0; k < num_cases; k++) {
                const i64 item = n * num_cases + k;
                i32 *out = outputs + item * num_outputs;
                if (stop) {
                    syn_skip_case(out, (i32)num_outputs, output_lengths + item, steps + item, status + item);
                    continue;
                }
                i32 s = syn_run_case(code + n * num_slots * 5, inputs + k * input_width, input_lengths[k], base,
                                     max_steps, tape, 1, out, (i32)num_outputs, output_lengths + item, steps + item,
                                     0);
                status[item] = (i8)s;
                stop = early_abort && s != ST_OK;
            }
        }
        free(tape);
    }
    return failed ? -1 : 0;
}

i64 synthenv_loop_iterations(i64 d, i64 v, i64 base) { return v == 0 ? 0 : syn_iterations(d, v, base); }

/* ---- PQT's reward (synthenv/scoring.py, PQT_SPEC §2), one program per thread. ----
 * The same arithmetic as the torch scorer: integer distances summed in double, each case's
 * r = (U - d) / U (+3 on an exact match), program reward = sum r / (4 K), or -2 / (4 K) once
 * any case failed. outputs hold at least expected_width values per case. */
static double score_case(const i32 *out, i32 length, const i32 *want, i32 wanted, i32 base, int *exact) {
    double distance = 0.0;
    *exact = length == wanted;
    for (i32 t = 0; t < wanted; t++) {
        if (t < length) {
            i64 diff = (i64)out[t] - (i64)want[t];
            distance += (double)(diff < 0 ? -diff : diff);
            *exact &= out[t] == want[t];
        } else {
            distance += (double)base;
        }
    }
    if (length > wanted) distance += (double)base * (double)(length - wanted);
    double unit = wanted > 0 ? (double)base * (double)wanted : (double)base;
    return (unit - distance) / unit + (*exact ? 3.0 : 0.0);
}

void synthenv_score(const i32 *outputs, const i32 *output_lengths, const i8 *status, i64 num_programs, i64 num_cases,
                    i64 num_outputs, const i32 *expected, const i32 *expected_lengths, i64 expected_width, i32 base,
                    double *rewards, u8_t *solved, double *case_rewards, u8_t *case_correct, i8 *program_status,
                    i32 num_threads) {
    if (num_threads <= 0) num_threads = omp_get_max_threads();
    const double scale = 4.0 * (double)num_cases;
#pragma omp parallel for num_threads(num_threads) schedule(static)
    for (i64 n = 0; n < num_programs; n++) {
        int ok = 1, all_exact = 1;
        i8 worst = ST_OK;
        double total = 0.0;
        for (i64 k = 0; k < num_cases; k++) {
            const i64 item = n * num_cases + k;
            const i8 s = status[item];
            if (s != ST_OK) ok = 0;
            if (s != ST_ABORTED && s > worst) worst = s;
            int exact;
            double r = score_case(outputs + item * num_outputs, output_lengths[item], expected + k * expected_width,
                                  expected_lengths[k], base, &exact);
            case_rewards[item] = r;
            case_correct[item] = (u8_t)(s == ST_OK && exact);
            all_exact &= exact;
            total += r;
        }
        if (!ok)
            for (i64 k = 0; k < num_cases; k++) case_rewards[n * num_cases + k] = 0.0;
        rewards[n] = ok ? total / scale : -2.0 / scale;
        solved[n] = (u8_t)(ok && all_exact);
        program_status[n] = worst;
    }
}

/* ---- The benchmark's reference: a careful plain interpreter of raw BF tokens. ----
 * No compiler: a precomputed bracket map (PQT_SPEC §1: unmatched brackets are one-step
 * no-ops), one command per step, cases in order; with early_abort, stop at the first failing
 * case (as PQT's scorer and the `cpu` pipeline do). */
enum { T_EOS = 0, T_RIGHT, T_LEFT, T_INC, T_DEC, T_OPEN, T_CLOSE, T_OUT, T_IN };

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
                      i32 max_steps, i32 *tape, i32 *out, i32 num_outputs, i32 *out_len, i32 *steps_out) {
    i32 pc = 0, ptr = 0, high = 0, next_in = 0, nout = 0, steps = 0, status = ST_OK;
    for (;;) {
        switch (prog[pc]) {
        case T_EOS: goto done;
        case T_RIGHT: if (++ptr > high) high = ptr; break;
        case T_LEFT: if (ptr > 0) ptr--; break;
        case T_INC: tape[ptr] = tape[ptr] == base - 1 ? 0 : tape[ptr] + 1; break;
        case T_DEC: tape[ptr] = tape[ptr] == 0 ? base - 1 : tape[ptr] - 1; break;
        case T_OPEN: if (tape[ptr] == 0 && partner[pc] >= 0) pc = partner[pc]; break;
        case T_CLOSE: if (tape[ptr] != 0 && partner[pc] >= 0) pc = partner[pc]; break;
        case T_OUT: if (nout < num_outputs) out[nout] = tape[ptr]; nout++; break;
        case T_IN: tape[ptr] = next_in < input_len ? inputs[next_in++] : 0; break;
        }
        pc++;
        if (++steps >= max_steps) { status = ST_STEP_LIMIT; break; }
    }
done:
    memset(tape, 0, sizeof(i32) * (size_t)(high + 1));
    for (i32 j = nout; j < num_outputs; j++) out[j] = 0;
    *out_len = nout;
    *steps_out = steps;
    return status;
}

int synthenv_naive(const long long *tokens, i64 num_programs, i64 length, const i32 *inputs,
                   const i32 *input_lengths, i64 num_cases, i64 input_width, i32 base, i32 max_steps,
                   i32 strict_syntax, i32 early_abort, i32 *outputs, i32 *output_lengths, i8 *status, i32 *steps,
                   i64 num_outputs, i32 num_threads) {
    int failed = 0;
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel num_threads(num_threads) reduction(| : failed)
    {
        i32 *tape = (i32 *)calloc((size_t)max_steps, sizeof(i32));
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
                                       tape, out, (i32)num_outputs, output_lengths + item, steps + item);
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

/* ---- compilers/traditional.py's passes, one program per thread, for CPU tensors ----
 * The same IR, bit for bit (tests/test_native_engine.py checks ir.equal on random programs).
 * Two linear passes: (1) lex up to the first EOS and match brackets (PQT: unmatched ones become
 * one-step no-ops), noting at each `]` whether its loop is innermost (no bracket inside) and
 * counted (innermost, body of +-<> only, net move 0), with the body's entry-cell delta and
 * no-clamping guard accumulated on the way; (2) fold runs and emit ops with running sums,
 * then patch jump targets. Writes every element of `code` [N, L + 1, 5]; slots after the
 * last op are HALT (all zero). */
enum { C_NONE = 0, C_ADD, C_MOVE, C_OUT, C_IN, C_OPEN, C_CLOSE, C_UNMATCHED };

typedef struct {
    i8 *cls;       /* [L] token class after matching */
    i8 *loop;      /* [L] at both brackets of a matched pair: 1 = innermost, 3 = also a counted loop */
    i32 *partner;  /* [L] matching bracket or -1 */
    i32 *delta;    /* [L] at a counted loop's `[`: the entry cell's change per iteration */
    i32 *guard;    /* [L] at a counted loop's `[`: lowest pointer at which the body never clamps */
    i32 *op_at;    /* [L] at a matched bracket: its op slot */
    i32 *stack;    /* [L] open brackets while matching */
} compile_scratch;

static const i8 compile_class[9] = {C_NONE, C_MOVE, C_MOVE, C_ADD, C_ADD, C_OPEN, C_CLOSE, C_OUT, C_IN};
static const i8 compile_move[9] = {0, 1, -1, 0, 0, 0, 0, 0, 0};  /* pointer move of `>` `<` */
static const i8 compile_add[9] = {0, 0, 0, 1, -1, 0, 0, 0, 0};   /* cell change of `+` `-` */
static const i8 compile_arg[9] = {0, 1, -1, 1, -1, 0, 0, 1, 1};  /* what a token adds to its op's arg */
static const i8 compile_io[9] = {0, 0, 0, 0, 0, 0, 0, 1, 1};
static const i8 compile_op_of[8] = {OP_HALT, OP_ADD, OP_MOVE, OP_OUT, OP_IN, OP_JZ, OP_JNZ, OP_NOP};
/* Random tokens make every data-dependent branch a coin flip, so the per-token work below is
 * table lookups and conditional moves; only brackets (and new ops) branch. */

/* Pass 1; returns the program's length (tokens before the first EOS). */
static i32 compile_match(const long long *tokens, i64 length, compile_scratch *w, i32 *balanced) {
    i32 len = 0, depth = 0, last_open = -1, clean = 0, offset = 0, low = 0, delta = 0;
    while (len < length && tokens[len] > 0 && tokens[len] <= T_IN) len++;
    *balanced = 1;
    for (i32 i = 0; i < len; i++) {
        const long long t = tokens[i];
        w->cls[i] = compile_class[t];
        /* offset, low, delta, clean: the body since the last `[` (its net move, lowest
         * offset, entry-cell delta, and whether it has no I/O) */
        offset += compile_move[t];
        low = offset < low ? offset : low;
        delta += offset == 0 ? compile_add[t] : 0;
        clean &= !compile_io[t];
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

/* Pass 2: one op per run of a foldable class (+-, <>, ., ,, unmatched brackets) or bracket.
 * While a run is open, ins[1] accumulates its arg and, for moves, ins[2] the deepest dip
 * below its start (turned into the floor in the fix-up). */
static i32 compile_emit(const long long *tokens, i32 len, compile_scratch *w, i32 *code) {
    i32 ops = -1, run = C_NONE, offset = 0, entry = 0, in_body = 0;
    i32 *ins = code - 5;
    for (i32 i = 0; i < len; i++) {
        const long long t = tokens[i];
        const i8 c = w->cls[i];
        const i32 bracket = c == C_OPEN || c == C_CLOSE;
        if (c != run || bracket) { /* a new op */
            ops++;
            ins += 5;
            run = c;
            ins[0] = compile_op_of[c];
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
        ins[1] += bracket ? 0 : compile_arg[t];
        offset += compile_move[t];
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

#ifdef SYNTHENV_DRIVER
/* Standalone driver for the sanitizer tests: `kernel in.bin out.bin`.
 * in.bin: 11 int64 (mode, N, P_or_L, K, I, base, max_steps, flag, O, threads, strict), then the
 * program (mode 0: int32 code [N, P, 5] run by synthenv_run; mode 1: int64 tokens [N, L] run
 * by synthenv_naive; mode 2: tokens compiled by synthenv_compile, then run), int32 inputs
 * [K, I] and int32 input lengths [K]. out.bin: outputs, output lengths, status, steps. */
#include <stdio.h>

static void *read_all(FILE *f, size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p || fread(p, 1, size, f) != size) { fprintf(stderr, "short input\n"); exit(2); }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s in.bin out.bin\n", argv[0]); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    i64 h[11];
    if (fread(h, sizeof(i64), 11, f) != 11) { fprintf(stderr, "short header\n"); return 2; }
    i64 mode = h[0], n = h[1], p = h[2], k = h[3], w = h[4], o = h[8];
    size_t program_bytes = mode == 0 ? sizeof(i32) * (size_t)(n * p * 5) : sizeof(long long) * (size_t)(n * p);
    if (mode < 0 || mode > 2) { fprintf(stderr, "mode must be 0, 1 or 2\n"); return 2; }
    void *program = read_all(f, program_bytes);
    i32 *inputs = (i32 *)read_all(f, sizeof(i32) * (size_t)(k * w));
    i32 *input_lengths = (i32 *)read_all(f, sizeof(i32) * (size_t)k);
    fclose(f);
    i32 *outputs = (i32 *)malloc(sizeof(i32) * (size_t)(n * k * o) + 1);
    i32 *lengths = (i32 *)malloc(sizeof(i32) * (size_t)(n * k) + 1);
    i8 *status = (i8 *)malloc((size_t)(n * k) + 1);
    i32 *steps = (i32 *)malloc(sizeof(i32) * (size_t)(n * k) + 1);
    int rc = 0;
    if (mode == 2) { /* compile the tokens, then run the IR */
        i32 *code = (i32 *)malloc(sizeof(i32) * (size_t)(n * (p + 1) * 5) + 1);
        i32 *num_ops = (i32 *)malloc(sizeof(i32) * (size_t)n + 1), *lens = (i32 *)malloc(sizeof(i32) * (size_t)n + 1);
        u8_t *balanced = (u8_t *)malloc((size_t)n + 1);
        rc = synthenv_compile((const long long *)program, n, p, code, num_ops, balanced, lens, (i32)h[9]);
        if (rc == 0)
            rc = synthenv_run(code, n, p + 1, inputs, input_lengths, k, w, (i32)h[5], (i32)h[6], (i32)h[7], outputs,
                              lengths, status, steps, o, (i32)h[9]);
        free(code); free(num_ops); free(lens); free(balanced);
    } else if (mode == 1) {
        rc = synthenv_naive((const long long *)program, n, p, inputs, input_lengths, k, w, (i32)h[5], (i32)h[6],
                            (i32)h[10], (i32)h[7], outputs, lengths, status, steps, o, (i32)h[9]);
    } else {
        rc = synthenv_run((const i32 *)program, n, p, inputs, input_lengths, k, w, (i32)h[5], (i32)h[6], (i32)h[7],
                          outputs, lengths, status, steps, o, (i32)h[9]);
    }
    if (rc != 0) { fprintf(stderr, "kernel failed: %d\n", rc); return 3; }
    FILE *g = fopen(argv[2], "wb");
    if (!g) { perror(argv[2]); return 2; }
    fwrite(outputs, sizeof(i32), (size_t)(n * k * o), g);
    fwrite(lengths, sizeof(i32), (size_t)(n * k), g);
    fwrite(status, 1, (size_t)(n * k), g);
    fwrite(steps, sizeof(i32), (size_t)(n * k), g);
    fclose(g);
    free(program); free(inputs); free(input_lengths); free(outputs); free(lengths); free(status); free(steps);
    return 0;
}
#endif /* SYNTHENV_DRIVER */
#endif /* SYN_CUDA */
