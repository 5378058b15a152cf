/* agents/variation.py's operators in C for CPU tensors: the same results, element for element.
 *
 * The torch versions are data-parallel passes over [N, L] tensors (the right shape for a GPU);
 * on a CPU a dozen memory-bound passes per generation cost more than running the programs, as
 * with the compiler's passes (compilers/traditional.c). Here each row is one short loop.
 * Programs are int64 token rows, EOS (0) after the end; tests/test_agents_variation.py checks
 * every function against its torch twin.
 *
 * Entry points: synthenv_apply_edits, synthenv_splice, synthenv_row_hashes, synthenv_program_lengths,
 * synthenv_top_unique.
 */

#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "rows.h"

typedef unsigned long long u64;

#define MAX_EDITS 64 /* agents/variation.py refuses more */
enum { SUBSTITUTE = 0, INSERT = 1, DELETE = 2 };

/* Copy parent positions [from, to) to the output at *w (EOS past the parent's end, nothing past L). */
static void copy_span(const i64 *parent, i64 len, i64 from, i64 to, i64 *out, i64 length, i64 *w) {
    for (i64 q = from; q < to && *w < length; q++) out[(*w)++] = q < len ? parent[q] : 0;
}

/* apply_edits: edits in ascending position order (stable) with a read cursor over the parent. */
int synthenv_apply_edits(const i64 *parents, i64 n, i64 length, const i64 *positions, const i64 *kinds,
                         const i64 *tokens, const unsigned char *active, i64 num_edits, i64 *out, int num_threads) {
    if (num_edits > MAX_EDITS) return -1;
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (i64 r = 0; r < n; r++) {
        const i64 *parent = parents + r * length, *pos = positions + r * num_edits;
        i64 *child = out + r * length;
        i64 order[MAX_EDITS], key[MAX_EDITS];
        for (i64 e = 0; e < num_edits; e++) { /* insertion sort: stable, E is tiny */
            i64 k = active[r * num_edits + e] ? pos[e] : length + 1, j = e;
            while (j > 0 && key[j - 1] > k) { key[j] = key[j - 1]; order[j] = order[j - 1]; j--; }
            key[j] = k;
            order[j] = e;
        }
        const i64 len = row_length(parent, length);
        i64 cursor = 0, w = 0;
        for (i64 i = 0; i < num_edits; i++) {
            const i64 e = order[i], at = r * num_edits + e;
            if (!active[at]) continue;
            const i64 read = pos[e] > cursor ? pos[e] : cursor;
            copy_span(parent, len, cursor, read, child, length, &w);
            if (kinds[at] != DELETE) {
                if (w < length) child[w] = tokens[at];
                w++;
            }
            cursor = read + (kinds[at] != INSERT && read < len);
        }
        copy_span(parent, len, cursor, length + cursor, child, length, &w);
    }
    return 0;
}

/* splice: first[:i] + second[j:j+w] + first[m:], cut at L; cut points per row in cuts [n, 4] = (i, m, j, w). */
void synthenv_splice(const i64 *firsts, const i64 *seconds, const i64 *cuts, i64 n, i64 length, i64 *out,
                     int num_threads) {
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (i64 r = 0; r < n; r++) {
        const i64 *a = firsts + r * length, *b = seconds + r * length, *c = cuts + 4 * r;
        i64 *child = out + r * length, w = 0;
        const i64 len_a = row_length(a, length), len_b = row_length(b, length);
        copy_span(a, len_a, 0, c[0], child, length, &w);
        copy_span(b, len_b, c[2], c[2] + c[3], child, length, &w);
        copy_span(a, len_a, c[1], len_a, child, length, &w);
        while (w < length) child[w++] = 0;
    }
}

/* row_hashes: sum over t of tokens[t] * multipliers[t], wrapping modulo 2^64 (torch's int64 product). */
void synthenv_row_hashes(const i64 *tokens, i64 n, i64 length, const i64 *multipliers, i64 *out, int num_threads) {
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (i64 r = 0; r < n; r++) {
        u64 h = 0;
        for (i64 t = 0; t < length; t++) h += (u64)tokens[r * length + t] * (u64)multipliers[t];
        out[r] = (i64)h;
    }
}

/* program_lengths: tokens before the first EOS of each row. */
void synthenv_program_lengths(const i64 *tokens, i64 n, i64 length, i64 *out, int num_threads) {
    if (num_threads <= 0) num_threads = omp_get_max_threads();
#pragma omp parallel for schedule(static) num_threads(num_threads)
    for (i64 r = 0; r < n; r++) out[r] = row_length(tokens + r * length, length);
}

/* top_unique: per group of n candidates (scores [groups, n] float32, hashes [groups, n]), the k best
 * unique ones, as agents/variation.py's top_unique computes them with torch:
 *   - a candidate ranks at its score if that is > -inf and no valid candidate of lower index has its
 *     hash (the first valid copy of its program); the others rank at -inf;
 *   - candidates are visited in the order shuffle[g] (NULL: index order) and sorted by rank,
 *     descending, stably (equal ranks keep their visiting order);
 *   - order[g, :k] are the first k candidates' indices, ranked[g, :k] their ranks, kept_hashes their hashes.
 * Returns 0, or -1 when memory runs out. */
typedef struct { float key; i64 at; } ranked_item;

static int by_rank(const void *a, const void *b) {
    const ranked_item *x = a, *y = b;
    if (x->key != y->key) return x->key > y->key ? -1 : 1; /* descending */
    return (x->at > y->at) - (x->at < y->at);                /* then visiting order: stable */
}

int synthenv_top_unique(const float *scores, const i64 *hashes, const i64 *shuffle, i64 groups, i64 n, i64 k,
                        i64 *order, float *ranked, i64 *kept_hashes, int num_threads) {
    if (num_threads <= 0) num_threads = omp_get_max_threads();
    i64 slots = 16;
    int bits = 4;
    while (slots < 2 * n) slots *= 2, bits++; /* open addressing at most half full */
    int failed = 0;
#pragma omp parallel num_threads(num_threads)
    {
        i64 *table = malloc(sizeof(i64) * slots);             /* candidate index + 1 per slot, 0: free */
        float *rank = malloc(sizeof(float) * n);
        ranked_item *items = malloc(sizeof(ranked_item) * n);
        if (!table || !rank || !items) {
#pragma omp atomic write
            failed = 1;
        }
#pragma omp for schedule(static)
        for (i64 g = 0; g < groups; g++) {
            if (!table || !rank || !items) continue;
            const float *score = scores + g * n;
            const i64 *hash = hashes + g * n;
            for (i64 q = 0; q < slots; q++) table[q] = 0;
            for (i64 j = 0; j < n; j++) {
                rank[j] = -INFINITY;
                if (!(score[j] > -INFINITY)) continue; /* invalid: never first, never hides a valid one */
                i64 q = (i64)(((u64)hash[j] * 0x9E3779B97F4A7C15ull) >> (64 - bits)); /* Fibonacci hashing */
                int seen = 0;
                while (table[q]) {
                    if (hash[table[q] - 1] == hash[j]) { seen = 1; break; }
                    q = (q + 1) & (slots - 1);
                }
                if (seen) continue;
                table[q] = j + 1;
                rank[j] = score[j];
            }
            for (i64 q = 0; q < n; q++) {
                const i64 j = shuffle ? shuffle[g * n + q] : q;
                items[q].key = rank[j];
                items[q].at = q;
            }
            qsort(items, (size_t)n, sizeof(ranked_item), by_rank);
            for (i64 t = 0; t < k; t++) {
                const i64 j = shuffle ? shuffle[g * n + items[t].at] : items[t].at;
                order[g * k + t] = j;
                ranked[g * k + t] = rank[j];
                kept_hashes[g * k + t] = hash[j];
            }
        }
        free(table);
        free(rank);
        free(items);
    }
    return failed ? -1 : 0;
}
