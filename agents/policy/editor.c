/* agents/editor.py's EditPolicy.sample in C for CPU tensors: the same edits and log-probabilities, up to
 * float rounding (tests/test_agents_editor_native.py compares them with the torch path).
 *
 * The torch pass is a dozen batched tensor ops over [S, N, L + 1, H] (the shape a GPU wants); on a CPU
 * most of its time goes to memory-bound elementwise passes and to positions past a program's end. Here
 * one loop per parent reads each parent once, computes only its own positions, and draws all of its
 * variants while its hidden features are in cache. The convolution over token and depth embeddings is
 * folded into one table per kernel offset (the input of every position is one of VOCAB x DEPTHS
 * embeddings): out[p] = bias + sum_j table[j][combo(p + j - k / 2)], which is the convolution's sum with
 * its terms grouped by offset.
 *
 * Shapes: S members (parameters), R rows of members in the batch (member_of[r] names each row's
 * member), N parents per row, L tokens, K variants per parent, E edits, H hidden, F features, C the
 * embedding size, Kw the kernel width, P = L + 1 positions.
 *
 * Entry point: synthenv_edit_sample.
 */

#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

/* program rows: the search's (agents/search/rows.h) */
#include "../search/rows.h"

enum { NUM_KINDS = 3, DELETE = 2, INSERT = 1, MAX_EDITS = 64 };

/* Index drawn from the distribution `probs [m]` (cumulative sums `cdf [m]`) by `u` in [0, 1), as
 * agents/editor.py's _inverse_cdf: the first index whose cdf exceeds u * cdf[m - 1], clamped; a
 * zero-probability index is never drawn (the likeliest one is taken instead). `past_end`: what the
 * clamp lands on when float rounding leaves u * cdf[m - 1] at the top of the cdf: index m - 1, or a
 * masked one past the m given (the torch pass's padding), hence the likeliest. */
static i64 inverse_cdf(const float *probs, const float *cdf, const float *logits, i64 m, float u, int past_end) {
    const float value = u * cdf[m - 1];
    i64 lo = 0, hi = m; /* searchsorted(right=True): first i with cdf[i] > value */
    while (lo < hi) {
        const i64 mid = (lo + hi) / 2;
        if (cdf[mid] <= value) lo = mid + 1; else hi = mid;
    }
    if (lo < m && probs[lo] > 0.0f) return lo;
    if (lo >= m && !past_end && probs[m - 1] > 0.0f) return m - 1;
    i64 best = 0;
    for (i64 i = 1; i < m; i++) if (logits[i] > logits[best]) best = i;
    return best;
}

/* softmax of logits[m] over the entries with ok[i] (all when ok is NULL) into probs, their cumulative
 * sums into cdf (masked entries: probability 0); returns log of the normaliser (logsumexp). */
static float softmax(const float *logits, const unsigned char *ok, i64 m, float *probs, float *cdf) {
    float top = -INFINITY;
    for (i64 i = 0; i < m; i++) if ((!ok || ok[i]) && logits[i] > top) top = logits[i];
    float total = 0.0f;
    for (i64 i = 0; i < m; i++) {
        probs[i] = (!ok || ok[i]) ? expf(logits[i] - top) : 0.0f;
        total += probs[i];
    }
    float running = 0.0f;
    for (i64 i = 0; i < m; i++) {
        probs[i] /= total;
        running += probs[i];
        cdf[i] = running;
    }
    return top + logf(total);
}

int synthenv_edit_sample(
    i64 rows, i64 n, i64 length, i64 variants, i64 num_edits, i64 num_features, const i64 *member_of,
    const i64 *parents, const float *features, const float *uniform,
    const float *token_embedding, const float *depth_embedding, const float *conv, const float *conv_bias,
    const float *film, const float *mix, const float *mix_bias, const float *where_head, const float *heads,
    const float *count_head, i64 vocab, i64 depths, i64 embedding, i64 hidden, i64 kernel, i64 open, i64 close,
    float inverse_temperature,
    i64 *positions, i64 *kinds, i64 *tokens, unsigned char *active, float *log_probs, int num_threads) {
    if (num_edits > MAX_EDITS || num_edits < 1 || kernel % 2 == 0) return -1;
    if (num_threads <= 0) num_threads = omp_get_max_threads();
    const i64 h = hidden, c = embedding, half = kernel / 2, combos = vocab * depths, width = length + 1;
    const i64 commands = vocab - 1, outs = NUM_KINDS + commands, draws = 1 + 3 * num_edits;
    int failed = 0;
#pragma omp parallel num_threads(num_threads)
    {
        /* per thread: the folded convolution of the member at hand, a parent's hidden features and
         * its distributions */
        float *table = malloc(sizeof(float) * kernel * combos * h);
        float *state = malloc(sizeof(float) * width * h), *mixed = malloc(sizeof(float) * width * h);
        float *where = malloc(sizeof(float) * width), *where_p = malloc(sizeof(float) * width);
        float *where_cdf = malloc(sizeof(float) * width);
        unsigned char *where_ok = malloc(width);
        i64 *combo = malloc(sizeof(i64) * width);
        float *film_out = malloc(sizeof(float) * h), *pooled = malloc(sizeof(float) * h);
        float *count = malloc(sizeof(float) * num_edits), *count_p = malloc(sizeof(float) * num_edits);
        float *count_cdf = malloc(sizeof(float) * num_edits), *out = malloc(sizeof(float) * outs);
        float probs[NUM_KINDS + 64], cdf[NUM_KINDS + 64];
        i64 table_member = -1;
        if (!table || !state || !mixed || !where || !where_p || !where_cdf || !where_ok || !combo || !film_out ||
            !pooled || !count || !count_p || !count_cdf || !out || outs > 64) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (i64 job = 0; job < rows * n; job++) {
            if (failed) continue;
            const i64 r = job / n, s = member_of[r];
            const i64 *parent = parents + job * length;
            const float *feature = features + job * num_features;
            const float *w_conv = conv + s * h * c * kernel, *w_film = film + s * num_features * h;
            const float *w_mix = mix + s * h * h, *b_mix = mix_bias + s * h, *w_where = where_head + s * h;
            const float *w_heads = heads + s * h * outs, *w_count = count_head + s * h * num_edits;
            if (s != table_member) { /* table[j][v * depths + d][hh] = sum_e conv[hh][e][j] * embedding(v, d)[e] */
                const float *tok = token_embedding + s * vocab * c, *dep = depth_embedding + s * depths * c;
                for (i64 j = 0; j < kernel; j++)
                    for (i64 v = 0; v < vocab; v++)
                        for (i64 d = 0; d < depths; d++) {
                            float *row = table + (j * combos + v * depths + d) * h;
                            for (i64 hh = 0; hh < h; hh++) {
                                float acc = 0.0f;
                                for (i64 e = 0; e < c; e++)
                                    acc += w_conv[(hh * c + e) * kernel + j] * (tok[v * c + e] + dep[d * c + e]);
                                row[hh] = acc;
                            }
                        }
                table_member = s;
            }
            const i64 len = row_length(parent, length);
            i64 depth = 0; /* depth before each token: opens so far minus closes so far and this one */
            for (i64 q = 0; q < width; q++) {
                const i64 t = q < len ? parent[q] : 0;
                const i64 at = depth - (t == close);
                combo[q] = t * depths + (at < 0 ? 0 : at >= depths ? depths - 1 : at);
                depth += (t == open) - (t == close);
            }
            for (i64 hh = 0; hh < h; hh++) {
                float acc = conv_bias[s * h + hh];
                for (i64 f = 0; f < num_features; f++) acc += feature[f] * w_film[f * h + hh];
                film_out[hh] = acc;
                pooled[hh] = 0.0f;
            }
            /* positions 0 .. len (the program's and the slot after it), one layer at a time over all of them:
             * each loop's iterations are independent, so they pipeline (a position at a time would chain
             * every accumulation through memory) */
            for (i64 p = 0; p <= len; p++) memcpy(state + p * h, film_out, sizeof(float) * h);
            for (i64 j = 0; j < kernel; j++)
                for (i64 p = 0; p <= len; p++) {
                    const i64 q = p + j - half;
                    if (q < 0 || q >= width) continue; /* the convolution's zero padding */
                    const float *restrict row = table + (j * combos + combo[q]) * h;
                    float *restrict x = state + p * h;
                    for (i64 hh = 0; hh < h; hh++) x[hh] += row[hh];
                }
            for (i64 p = 0; p <= len; p++) {
                float *restrict x = state + p * h, *restrict acc = mixed + p * h;
                for (i64 hh = 0; hh < h; hh++) {
                    x[hh] = x[hh] > 0.0f ? x[hh] : 0.0f;
                    acc[hh] = b_mix[hh];
                }
            }
            for (i64 hh = 0; hh < h; hh++) {
                const float *restrict m = w_mix + hh * h;
                for (i64 p = 0; p <= len; p++) {
                    const float value = state[p * h + hh];
                    float *restrict acc = mixed + p * h;
                    for (i64 o = 0; o < h; o++) acc[o] += value * m[o];
                }
            }
            for (i64 p = 0; p <= len; p++) {
                float *restrict x = state + p * h;
                const float *restrict acc = mixed + p * h;
                float logit = 0.0f;
                for (i64 hh = 0; hh < h; hh++) {
                    x[hh] += acc[hh] > 0.0f ? acc[hh] : 0.0f;
                    logit += x[hh] * w_where[hh];
                    pooled[hh] += x[hh];
                }
                where_ok[p] = p < length; /* a full program has no slot to append to */
                where[p] = where_ok[p] ? logit * inverse_temperature : -1e9f;
            }
            for (i64 hh = 0; hh < h; hh++) pooled[hh] /= (float)(len + 1);
            for (i64 e = 0; e < num_edits; e++) {
                float acc = 0.0f;
                for (i64 hh = 0; hh < h; hh++) acc += pooled[hh] * w_count[hh * num_edits + e];
                count[e] = acc * inverse_temperature;
            }
            const i64 span = len + 1; /* positions 0 .. len; beyond them probability 0 */
            const int padded = span < width || !where_ok[len]; /* the torch pass has masked positions past them */
            const float where_norm = softmax(where, where_ok, span, where_p, where_cdf);
            const float count_norm = softmax(count, NULL, num_edits, count_p, count_cdf);
            for (i64 k = 0; k < variants; k++) {
                const i64 row = job * variants + k;
                const float *u = uniform + row * draws;
                const i64 chosen = inverse_cdf(count_p, count_cdf, count, num_edits, u[0], 0);
                float lp = count[chosen] - count_norm;
                for (i64 e = 0; e < num_edits; e++) {
                    const i64 slot = row * num_edits + e;
                    const i64 p = inverse_cdf(where_p, where_cdf, where, span, u[1 + e], padded);
                    const float *x = state + p * h;
                    for (i64 o = 0; o < outs; o++) {
                        float acc = 0.0f;
                        for (i64 hh = 0; hh < h; hh++) acc += x[hh] * w_heads[hh * outs + o];
                        out[o] = acc * inverse_temperature;
                    }
                    const unsigned char at_end = p == len, kind_ok[NUM_KINDS] = {!at_end, 1, !at_end};
                    const float kind_norm = softmax(out, kind_ok, NUM_KINDS, probs, cdf);
                    float kind_logits[NUM_KINDS];
                    for (i64 o = 0; o < NUM_KINDS; o++) kind_logits[o] = kind_ok[o] ? out[o] : -1e9f;
                    const i64 kind = inverse_cdf(probs, cdf, kind_logits, NUM_KINDS, u[1 + num_edits + 2 * e], 0);
                    const float token_norm = softmax(out + NUM_KINDS, NULL, commands, probs, cdf);
                    const i64 command = inverse_cdf(probs, cdf, out + NUM_KINDS, commands, u[2 + num_edits + 2 * e], 0);
                    positions[slot] = p;
                    kinds[slot] = kind;
                    tokens[slot] = 1 + command;
                    active[slot] = e <= chosen;
                    if (e <= chosen)
                        lp += (where[p] - where_norm) + (out[kind] - kind_norm) +
                              (kind == DELETE ? 0.0f : out[NUM_KINDS + command] - token_norm);
                }
                log_probs[row] = lp;
            }
        }
        free(table); free(state); free(mixed); free(where); free(where_p); free(where_cdf); free(where_ok); free(combo);
        free(film_out); free(pooled); free(count); free(count_p); free(count_cdf); free(out);
    }
    return failed ? -2 : 0;
}
