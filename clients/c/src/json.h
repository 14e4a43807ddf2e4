/* json.h: the strict JSON readers of json.c (on json_scan.c's scanner). Not installed;
 * internal.h, which every source includes, includes it at its end, after the types it
 * uses. */
#ifndef MT_JSON_H
#define MT_JSON_H

#include "internal.h"

/* json.c: a strict reader of one flat JSON object */
typedef enum { MT_JSON_NUMBER, MT_JSON_STRING, MT_JSON_OTHER } mt_json_kind;
typedef struct mt_json_member {
    char *key;
    mt_json_kind kind;
    double number;
    bool integer; /* a number without fraction or exponent */
    bool exact;   /* an integer in 0 .. 2^64 - 1, its value in u64 (exact: `number` is
                   * not above 2^53, and ids may be) */
    uint64_t u64;
    char *string; /* MT_JSON_STRING: decoded UTF-8; MT_JSON_OTHER: the value's raw text;
                   * MT_JSON_NUMBER: NULL (the value is `number`) */
} mt_json_member;
/* Parse `text` as one JSON object; on failure returns false with a reason in err. */
bool mt_json_object(const char *text, mt_json_member **members, size_t *n, char *err,
                    size_t err_size);
void mt_json_free(mt_json_member *members, size_t n);
/* The last member `key` of m[0..n) (Python's json.loads: a key repeated takes its last
 * value), or NULL; `m` may be NULL when `n` is 0 (an object not read). */
const mt_json_member *mt_json_find(const mt_json_member *m, size_t n, const char *key);
/* True if `text` is one valid JSON value (of any kind); _check: else false with the
 * reason in err (Python's json.loads's words, json_scan.h). */
bool mt_json_valid(const char *text);
bool mt_json_check(const char *text, char *err, size_t err_size);
/* Whether the strings of `text` (JSON already read) hold no \uXXXX escape of a lone
 * UTF-16 surrogate (one not in a high-low pair; mt_json_string reads it as U+FFFD);
 * else false, with "\uXXXX at character <n>" (the escape as written) in err
 * (json_scan.c; client/parameters.py lone_surrogate). */
bool mt_json_no_lone_surrogate(const char *text, char *err, size_t err_size);

/* Split `text`, one JSON array, into the raw texts of its items (each NUL-terminated). */
bool mt_json_array(const char *text, char ***items, size_t *n, char *err, size_t err_size);
void mt_json_array_free(char **items, size_t n);

/* json_repr.c: the value of the last member `name` of the JSON object `object` as Python's
 * repr shows it once json.loads read it (True, None, 1.5, inf, [1, 'a'], {'k': None}; an
 * integer's digits as written), in a new string (NULL: no such member, or no memory), and
 * the name of its Python type in *type ("int", "float", "bool", "NoneType", "str", "list",
 * "dict"). */
char *mt_json_member_repr(const char *object, const char *name, const char **type);

/* json_repr.c: the bytes of the first `chars` UTF-8 characters of s[0..n) (continuation
 * bytes 10xxxxxx counted with their lead: Python's cut by characters, never one cut). */
size_t mt_utf8_prefix(const char *s, size_t n, size_t chars);
/* The bytes of a stop record's message that words quote: its first line (up to a \r or
 * \n: a notice is one line), at most MT_REASON_CHARS UTF-8 characters (mt_utf8_prefix);
 * Python's reason_line.said_line, the same characters. */
#define MT_REASON_CHARS 200
size_t mt_reason_line(const char *message);

#endif
