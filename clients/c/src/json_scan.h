/* json_scan.h: the JSON scanner (json_scan.c) that json.c's readers are built on. Not
 * installed; after internal.h. Each call reads at p->i and moves p->i past what it read;
 * a failure returns false with "<what> at character <i>" in p->err. */
#ifndef MT_JSON_SCAN_H
#define MT_JSON_SCAN_H

#include "internal.h"

typedef struct mt_json_parser {
    const char *s; /* the text, NUL-terminated */
    size_t i;      /* the position */
    char *err;     /* the reason of a failure (err_size bytes) */
    size_t err_size;
} mt_json_parser;

/* Python's json.loads's words (JSONDecodeError.msg; a trailing " at" dropped, as
 * client/parameters.py _from_env drops it) */
#define MT_JSON_NO_VALUE "Expecting value"
#define MT_JSON_NO_KEY "Expecting property name enclosed in double quotes"
#define MT_JSON_NO_COLON "Expecting ':' delimiter"
#define MT_JSON_NO_COMMA "Expecting ',' delimiter"
#define MT_JSON_EXTRA "Extra data"
#define MT_JSON_UNTERMINATED "Unterminated string starting"
/* (Python 3.13's, at the comma; 3.10-3.12 said MT_JSON_NO_KEY or MT_JSON_NO_VALUE at the
 * bracket: client/parameters.py json_fault says 3.13's words on every Python) */
#define MT_JSON_TRAILING_OBJECT "Illegal trailing comma before end of object"
#define MT_JSON_TRAILING_ARRAY "Illegal trailing comma before end of array"

/* Record why it failed (at p->i; _at: at byte `at`), "<what> at character <n>", n
 * counted in characters as Python counts them; false. */
bool mt_json_fail(mt_json_parser *p, const char *what);
bool mt_json_fail_at(mt_json_parser *p, const char *what, size_t at);
/* Skip white space (space, tab, newline, carriage return). */
void mt_json_skip_ws(mt_json_parser *p);
/* A string at p->i (the opening quote), decoded into a new NUL-terminated UTF-8 string. */
bool mt_json_string(mt_json_parser *p, char **out);
/* A number (NaN, Infinity and -Infinity too); *integer: without fraction or exponent. */
bool mt_json_number(mt_json_parser *p, double *out, bool *integer);
/* Past the ',' at p->i and the white space after it; false (MT_JSON_TRAILING_OBJECT or
 * _ARRAY at the comma) if `close` ('}' or ']') comes next. */
bool mt_json_comma(mt_json_parser *p, char close);
/* Skip any value (nested arrays and objects too, at most 64 deep; depth: the current). */
bool mt_json_skip_value(mt_json_parser *p, int depth);

#endif
