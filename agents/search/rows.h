/* Token rows as agents/ passes them to C: int64 tokens, EOS (0) after the program's end.
 * Shared by variation.c and feedback.c. */

#ifndef SYNTHENV_AGENTS_ROWS_H
#define SYNTHENV_AGENTS_ROWS_H

typedef long long i64;

/* Tokens before the first EOS of a row of `length` tokens. */
static inline i64 row_length(const i64 *row, i64 length) {
    i64 n = 0;
    while (n < length && row[n] != 0) n++;
    return n;
}

#endif
