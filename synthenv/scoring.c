/* PQT's reward (synthenv/scoring.py, docs/semantics.md §2) in C, one program per thread, for CPU tensors.
 * The same arithmetic as the torch scorer: integer distances summed in double, each case's
 * r = (U - d) / U (+3 on an exact match), program reward = sum r / (4 K), or -2 / (4 K) once
 * any case failed. outputs hold at least expected_width values per case. */
#include <omp.h>

#include "common.h"

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
        i8 worst = ST_OK; /* Execution.program_status */
        double total = 0.0;
        for (i64 k = 0; k < num_cases; k++) {
            const i64 item = n * num_cases + k;
            const i8 s = status[item];
            if (ok && s != ST_OK && s != ST_ABORTED) worst = s; /* the first failing case's status */
            if (s != ST_OK) ok = 0;
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

