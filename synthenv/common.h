/* What every synthenv C and CUDA source shares: the build (C or CUDA), fixed-width integer
 * names, and the enums and tables generated from the Python sources (tables.h). */
#ifndef SYNTHENV_COMMON_H
#define SYNTHENV_COMMON_H

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

#include "tables.h"

/* A task's dialect as the VM reads it (synthenv.dialect.Dialect.codes): left edge (EDGE_*), end of
 * input (EOF_*), output comparison (CMP_*) and, under EDGE_WRAP, the ring's size (Dialect.ring). */
typedef struct {
    i32 edge, eof, cmp, ring;
} syn_dialect;

/* A case that never ran (early abort): zero outputs and steps, ABORTED (synthenv/execution.py). */
SYN_FN void syn_skip_case(i32 *out, i32 num_outputs, i32 *out_len, i32 *steps, i8 *status) {
    for (i32 j = 0; j < num_outputs; j++) out[j] = 0;
    *out_len = 0;
    *steps = 0;
    *status = ST_ABORTED;
}

#endif /* SYNTHENV_COMMON_H */
