/* Generated from the Python sources by synthenv.shared_tables.tables_header(); do not edit.
 * Regenerate with synthenv.shared_tables.write_tables_header(); tests/test_native_build.py fails when
 * this file and the Python enums or tables differ. */
#ifndef SYNTHENV_TABLES_H
#define SYNTHENV_TABLES_H
/* synthenv.ir.Op */
enum { OP_HALT = 0, OP_ADD = 1, OP_MOVE = 2, OP_OUT = 3, OP_IN = 4, OP_JZ = 5, OP_JNZ = 6, OP_NOP = 7, OP_LOOP = 8 };
/* synthenv.language.Status */
enum { ST_OK = 0, ST_STEP_LIMIT = 1, ST_SYNTAX_ERROR = 2, ST_ABORTED = 3, ST_LEFT_EDGE = 4 };
/* synthenv.language token ids */
enum { T_EOS = 0, T_RIGHT = 1, T_LEFT = 2, T_INC = 3, T_DEC = 4, T_OPEN = 5, T_CLOSE = 6, T_OUT = 7, T_IN = 8 };
/* synthenv.dialect: Dialect.codes (left edge, end of input, output comparison) and its WHITESPACE */
enum { EDGE_CLAMP = 0, EDGE_ERROR = 1, EDGE_WRAP = 2 };
enum { EOF_ZERO = 0, EOF_MAX = 1, EOF_UNCHANGED = 2 };
enum { CMP_EXACT = 0, CMP_RSTRIP = 1 };
#define SYN_IS_SPACE(v) ((v) == 9 || (v) == 10 || (v) == 11 || (v) == 12 || (v) == 13 || (v) == 32)
#ifdef SYNTHENV_LEX_TABLES
/* compilers/traditional.py: token classes and the lexing tables (indexed by token id) */
enum { C_NONE = 0, C_ADD = 1, C_MOVE = 2, C_OUT = 3, C_IN = 4, C_OPEN = 5, C_CLOSE = 6, C_UNMATCHED = 7 };
static const signed char syn_token_class[9] = {0, 2, 2, 1, 1, 5, 6, 3, 4};
static const signed char syn_move_delta[9] = {0, 1, -1, 0, 0, 0, 0, 0, 0};
static const signed char syn_add_delta[9] = {0, 0, 0, 1, -1, 0, 0, 0, 0};
static const signed char syn_token_io[9] = {0, 0, 0, 0, 0, 0, 0, 1, 1};
static const signed char syn_class_op[8] = {0, 1, 2, 3, 4, 5, 6, 7};
#endif /* SYNTHENV_LEX_TABLES */
#endif /* SYNTHENV_TABLES_H */
