/* Standalone driver for the sanitizer tests (synthenv/testing/sanitizer.py): `driver in.bin out.bin`,
 * linked with the engine's, the C compiler's and the naive interpreter's sources (sanitizer.driver_sources()).
 * in.bin: 15 int64 (mode, N, P_or_L, K, I, base, max_steps, flag, O, threads, strict, edge, eof, cmp,
 * ring: the dialect as syn_dialect holds it), then the
 * program (mode 0: int32 code [N, P, 5] run by synthenv_run; mode 1: int64 tokens [N, L] run
 * by synthenv_naive; mode 2: tokens compiled by synthenv_compile, then run), int32 inputs
 * [K, I] and int32 input lengths [K]. out.bin: outputs, output lengths, status, steps. */
#include <stdio.h>

#include "common.h"

int synthenv_run(const i32 *code, i64 num_programs, i64 num_slots, const i32 *inputs, const i32 *input_lengths,
                 i64 num_cases, i64 input_width, i32 base, i32 max_steps, i32 edge, i32 eof, i32 cmp, i32 ring,
                 i32 early_abort, i32 *outputs, i32 *output_lengths, i8 *status, i32 *steps, i64 num_outputs,
                 i32 num_threads, i32 keep_failed, double deadline);
int synthenv_naive(const long long *tokens, i64 num_programs, i64 length, const i32 *inputs,
                   const i32 *input_lengths, i64 num_cases, i64 input_width, i32 base, i32 max_steps,
                   i32 strict_syntax, i32 edge, i32 eof, i32 cmp, i32 ring, i32 early_abort, i32 *outputs,
                   i32 *output_lengths, i8 *status, i32 *steps, i64 num_outputs, i32 num_threads);
int synthenv_compile(const long long *tokens, i64 num_programs, i64 length, i32 *code, i32 *num_ops, u8_t *balanced,
                     i32 *lengths, i32 num_threads);

static void *read_all(FILE *f, size_t size) {
    void *p = malloc(size ? size : 1);
    if (!p || fread(p, 1, size, f) != size) { fprintf(stderr, "short input\n"); exit(2); }
    return p;
}

int main(int argc, char **argv) {
    if (argc != 3) { fprintf(stderr, "usage: %s in.bin out.bin\n", argv[0]); return 2; }
    FILE *f = fopen(argv[1], "rb");
    if (!f) { perror(argv[1]); return 2; }
    i64 h[15];
    if (fread(h, sizeof(i64), 15, f) != 15) { fprintf(stderr, "short header\n"); return 2; }
    const i32 edge = (i32)h[11], eof = (i32)h[12], cmp = (i32)h[13], ring = (i32)h[14];
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
            rc = synthenv_run(code, n, p + 1, inputs, input_lengths, k, w, (i32)h[5], (i32)h[6], edge, eof, cmp, ring,
                              (i32)h[7], outputs, lengths, status, steps, o, (i32)h[9], 0, 0.0);
        free(code); free(num_ops); free(lens); free(balanced);
    } else if (mode == 1) {
        rc = synthenv_naive((const long long *)program, n, p, inputs, input_lengths, k, w, (i32)h[5], (i32)h[6],
                            (i32)h[10], edge, eof, cmp, ring, (i32)h[7], outputs, lengths, status, steps, o,
                            (i32)h[9]);
    } else {
        rc = synthenv_run((const i32 *)program, n, p, inputs, input_lengths, k, w, (i32)h[5], (i32)h[6], edge, eof,
                          cmp, ring, (i32)h[7], outputs, lengths, status, steps, o, (i32)h[9], 0, 0.0);
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
