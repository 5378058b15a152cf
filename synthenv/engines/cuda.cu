/* The `cuda` engine's entry point: the VM (vm.h) with one thread per (program, case), compiled
 * by NVRTC (synthenv/engines/cuda.py; tests/test_cuda_compile.py compiles every variant in CI).
 * Grid-stride over items; thread slot s owns the tape column tape[i * stride + s]
 * (interleaved, so lanes at the same pointer coalesce).
 * Early abort: first_failure[n] holds the smallest index of a failed case of program n so far
 * (initialised to K); a case after it is skipped or stops at its next poll. Cases before the
 * first failure always run to the end, so the ABORTED mask that the engine computes afterwards
 * from the statuses (synthenv/execution.py) does not depend on timing. The dialect (edge, eof,
 * cmp, ring) as syn_dialect holds it; each tape column has max(max_steps, ring) cells. */
#include "vm.h"

/* Variants (synthenv/engines/cuda.py: KernelVariant): -DSYN_CELL_U8 for bytes as cells (base
 * <= 256), -DSYN_EARLY_ABORT=0/1. */
#ifndef SYN_EARLY_ABORT
#define SYN_EARLY_ABORT 1
#endif

extern "C" __global__ void synthenv_run_cuda(
    const i32 *code, i64 num_programs, i64 num_slots, const i32 *inputs, const i32 *input_lengths,
    i64 num_cases, i64 input_width, i32 base, i32 max_steps, i32 edge, i32 eof, i32 cmp, i32 ring, i32 *outputs,
    i32 *output_lengths, i8 *status, i32 *steps, i64 num_outputs, cell_t *tape, i64 stride, i32 *first_failure) {
    const i64 slot = (i64)blockIdx.x * blockDim.x + threadIdx.x;
    const i64 total = num_programs * num_cases;
    const syn_dialect dialect = {edge, eof, cmp, ring};
    for (i64 item = slot; item < total; item += stride) {
        const i64 n = item / num_cases, k = item % num_cases;
        volatile i32 *flag = SYN_EARLY_ABORT ? (volatile i32 *)(first_failure + n) : 0;
        i32 *out = outputs + item * num_outputs;
        if (flag && *flag < k) {
            syn_skip_case(out, (i32)num_outputs, output_lengths + item, steps + item, status + item);
            continue;
        }
        i32 s = syn_run_case(code + n * num_slots * 5, inputs + k * input_width, input_lengths[k], base,
                             max_steps, dialect, tape + slot, stride, out, (i32)num_outputs, output_lengths + item,
                             steps + item, flag, (i32)k, 0);
        status[item] = (i8)s;
        if (flag && s != ST_OK && s != ST_ABORTED) atomicMin(first_failure + n, (i32)k);
    }
}
