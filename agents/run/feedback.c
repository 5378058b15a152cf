/* agents/feedback.py's feedback_features in C for CPU tensors: one row per loop instead of a
 * dozen passes over [N, K] and [N, K, M] tensors (the torch version is what a GPU runs;
 * tests/test_agents_feedback.py checks that the two agree).
 *
 * Entry point: synthenv_feedback_features. Columns, in agents/feedback.py's FEATURES order:
 * reward, passed, failed, too_short, too_long, wrong_values, case_reward, length, positions_right.
 */

#include <omp.h>

#include "common.h"
/* program rows: the search's (agents/search/rows.h) */
#include "../search/rows.h"

#define NUM_FEATURES 9

void synthenv_feedback_features(i64 n, i64 k, i64 o, i64 m, i64 length, const float *reward, const i8 *passed,
                                const i8 *status, const float *case_rewards, const i32 *output_lengths,
                                const i32 *outputs, const i64 *program, const i64 *expected,
                                const i64 *expected_lengths, i64 max_len, float *out, int num_threads) {
    if (num_threads <= 0) num_threads = omp_get_max_threads();
    i64 wanted_total = 0; /* expected positions over all cases */
    for (i64 c = 0; c < k; c++) wanted_total += expected_lengths[c];
    if (wanted_total < 1) wanted_total = 1;
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (i64 r = 0; r < n; r++) {
        i64 num_passed = 0, failed = 0, too_short = 0, too_long = 0, wrong = 0, right = 0;
        float rewards = 0.0f;
        for (i64 c = 0; c < k; c++) {
            const i64 at = r * k + c, printed = output_lengths[at], wanted = expected_lengths[c];
            const int ok = status[at] == ST_OK, pass = passed[at] != 0;
            num_passed += pass;
            failed |= !ok;
            rewards += case_rewards[at];
            const i64 shared = printed < wanted ? printed : wanted;
            for (i64 t = 0; t < shared && t < m && t < o; t++)
                right += outputs[at * o + t] == expected[c * m + t];
            too_short += ok && printed < wanted;
            too_long += ok && printed > wanted;
            wrong += ok && printed == wanted && !pass;
        }
        float *row = out + r * NUM_FEATURES;
        row[0] = reward[r];
        row[1] = (float)num_passed / (float)k;
        row[2] = (float)failed;
        row[3] = (float)too_short / (float)k;
        row[4] = (float)too_long / (float)k;
        row[5] = (float)wrong / (float)k;
        row[6] = rewards / (float)k / 4.0f;
        row[7] = (float)row_length(program + r * length, length) / (float)max_len;
        row[8] = (float)right / (float)wanted_total;
    }
}
