/* The `native` engine's entry point: the VM (vm.h) over N programs x K cases on the CPU.
 * OpenMP over programs; each thread runs one program's K cases in order, so early abort is a
 * `break` after the first failing case (the rest are ABORTED: synthenv/execution.py). */
#include <omp.h>
#include <time.h>

#include "vm.h"

/* The CLOCK_MONOTONIC time in seconds: Python's time.monotonic() on Linux. */
static double syn_monotonic(void) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + 1e-9 * (double)now.tv_nsec;
}

/* Returns 0; -1 if a tape could not be allocated; 1 if `deadline` (a CLOCK_MONOTONIC time, 0: none) passed
 * before every program ran (each thread looks every 16 programs; the results are then incomplete).
 * keep_failed: see syn_run_case. The dialect (edge, eof, cmp, ring) as syn_dialect holds it. */
int synthenv_run(const i32 *code, i64 num_programs, i64 num_slots, const i32 *inputs, const i32 *input_lengths,
                 i64 num_cases, i64 input_width, i32 base, i32 max_steps, i32 edge, i32 eof, i32 cmp, i32 ring,
                 i32 early_abort, i32 *outputs, i32 *output_lengths, i8 *status, i32 *steps, i64 num_outputs,
                 i32 num_threads, i32 keep_failed, double deadline) {
    int failed = 0;
    volatile int expired = 0; /* set by the thread that sees the deadline pass; the others then skip */
    const syn_dialect dialect = {edge, eof, cmp, ring};
    const i32 cells = edge == EDGE_WRAP && ring > max_steps ? ring : max_steps;
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel num_threads(num_threads) reduction(| : failed)
    {
        cell_t *tape = (cell_t *)calloc((size_t)cells, sizeof(cell_t));
        if (!tape) failed = 1;
#pragma omp for schedule(dynamic, 16)
        for (i64 n = 0; n < num_programs; n++) {
            if (!tape || expired) continue;
            if (deadline > 0 && n % 16 == 0 && syn_monotonic() > deadline) {
                expired = 1;
                continue;
            }
            int stop = 0;
            for (i64 k = 0; k < num_cases; k++) {
                const i64 item = n * num_cases + k;
                i32 *out = outputs + item * num_outputs;
                if (stop) {
                    syn_skip_case(out, (i32)num_outputs, output_lengths + item, steps + item, status + item);
                    continue;
                }
                i32 s = syn_run_case(code + n * num_slots * 5, inputs + k * input_width, input_lengths[k], base,
                                     max_steps, dialect, tape, 1, out, (i32)num_outputs, output_lengths + item, steps + item,
                                     0, (i32)k, keep_failed);
                status[item] = (i8)s;
                stop = early_abort && s != ST_OK;
            }
        }
        free(tape);
    }
    return failed ? -1 : expired ? 1 : 0;
}

/* syn_iterations for tests: least t >= 1 with (v + t d) mod base == 0, or 0. */
i64 synthenv_loop_iterations(i64 d, i64 v, i64 base) { return v == 0 ? 0 : syn_iterations(d, v, base); }
