/* synthenv's VM: the IR interpreter, written once and shared by the entry points of the
 * `native` engine (engines/native.c, C + OpenMP) and the `cuda` engine (engines/cuda.cu, NVRTC).
 * The IR semantics are those of the docstring of synthenv/ir.py; the per-case results follow
 * the execution contract of synthenv/execution.py. Every line that differs between the C and
 * CUDA builds sits behind SYN_CUDA.
 * Dispatch: computed goto (threaded code) under GCC/Clang, a switch elsewhere and on CUDA. */
#ifndef SYNTHENV_VM_H
#define SYNTHENV_VM_H

#include "common.h"

#if defined(SYN_CELL_U8)
typedef unsigned char cell_t; /* CUDA, base <= 256: 4x less tape memory */
#else
typedef i32 cell_t;
#endif

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

/* Run one IR program on one input (case `case_index` of its task) in `dialect`. Returns a Status
 * and writes, per the execution contract (synthenv/execution.py): for OK, the first num_outputs
 * values printed (zero-padded), their count (under CMP_RSTRIP up to the last non-whitespace value)
 * and the raw step count; for a failure, zero outputs, count 0 and steps = max_steps (LEFT_EDGE:
 * the steps up to and including the failing `<`), or, with keep_failed, what the run printed
 * before it stopped: a diagnostic for tests, not part of the contract. The tape must be all zeros
 * on entry (cells at tape[i * stride]: max_steps of them, or dialect.ring under EDGE_WRAP); it is
 * all zeros again on return.
 * first_failure (CUDA early abort, else 0): the smallest index of a failed case of this program
 * so far; the run stops (ABORTED) once a case before it has failed. */
SYN_FN i32 syn_run_case(const i32 *code, const i32 *inputs, i32 input_len, i32 base, i32 max_steps,
                        syn_dialect dialect, cell_t *tape, i64 stride, i32 *out, i32 num_outputs, i32 *out_len,
                        i32 *steps_out, volatile i32 *first_failure, i32 case_index, i32 keep_failed) {
    i32 pc = 0, ptr = 0, next_in = 0, nout = 0, high = 0, status, kept = 0;
    i64 steps = 0;
    /* EDGE_WRAP: the pointer unwrapped (vptr) and the range it has touched, for clearing the ring */
    const i32 ring = dialect.edge == EDGE_WRAP ? dialect.ring : 0;
    i32 vptr = 0, vlo = 0, vhi = 0;
    const i32 eof = dialect.eof == EOF_MAX ? base - 1 : 0;
    /* hang watch: the iteration started at pc w_pc with pointer w_ptr and input position w_in */
    i32 log_n = LOG_OFF, w_pc = -1, w_ptr = 0, w_in = 0;
    i32 log_pos[SYN_LOG], log_old[SYN_LOG];
#ifdef SYN_CUDA
    i32 polls = 0;
#else
    (void)first_failure;
    (void)case_index;
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
            if (ring) { /* EDGE_WRAP: the tape is a ring */
                CHARGE(ins[3]);
                vptr += arg;
                vlo = vptr < vlo ? vptr : vlo;
                vhi = vptr > vhi ? vptr : vhi;
                ptr = syn_wrap(vptr, ring);
                pc++;
                NEXT;
            }
            if (ptr + arg < ins[2] && dialect.edge == EDGE_ERROR) {
                /* The run passes cell 0. Runs of moves are monotone (compilers/traditional.py), so
                 * this is a run of `<` whose (ptr + 1)-th fails; the ptr before it are steps. */
                CHARGE(ptr);
                steps += 1;
                goto left_edge;
            }
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
            if (!SYN_IS_SPACE(v)) kept = end; /* CMP_RSTRIP counts up to here */
            pc++;
            NEXT;
        }
        OP(in, OP_IN) {
            CHARGE(ins[3]);
            const i32 first = next_in;
            next_in += arg;
            i32 v = eof; /* past the input: the dialect's end-of-input value */
            if (next_in - 1 < input_len) v = inputs[next_in - 1];
            else if (dialect.eof == EOF_UNCHANGED) v = first < input_len ? inputs[input_len - 1] : (i32)TAPE(ptr);
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
            if (first_failure && (++polls & 63) == 0 && *first_failure < case_index) {
                status = ST_ABORTED; /* an earlier case failed: this one's result is not needed */
                steps = 0;
                nout = 0;
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
                    if (ring) {
                        const i32 vat = vptr + body[2];
                        vlo = vat < vlo ? vat : vlo;
                        vhi = vat > vhi ? vat : vhi;
                        at = syn_wrap(vat, ring);
                    } else if (at > high) {
                        high = at;
                    }
                    TAPE(at) = (cell_t)syn_wrap((i64)TAPE(at) + t * body[1], base);
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
    if (!keep_failed) nout = 0; /* a failed case exposes only its status and step count */
    goto done;
left_edge:
    status = ST_LEFT_EDGE;
    if (!keep_failed) nout = 0;
done:
    if (status == ST_OK && dialect.cmp == CMP_RSTRIP) nout = kept;
    if (ring) { /* clear what the run touched: the ring, or the cells vlo..vhi on it */
        if ((i64)vhi - vlo + 1 >= ring) vlo = 0, vhi = ring - 1;
        for (i32 v = vlo; v <= vhi; v++) TAPE(syn_wrap(v, ring)) = 0;
    }
    for (i32 j = 0; j <= high; j++) TAPE(j) = 0;
    for (i32 j = nout < 0 ? 0 : nout; j < num_outputs; j++) out[j] = 0;
    *out_len = nout;
    *steps_out = (i32)steps;
    return status;
#undef CHARGE
#undef LOG_WRITE
#undef WATCH
}

#endif /* SYNTHENV_VM_H */
