/* restarts_left.h: a stop record's reason's "restarts_left" (melissa_trainer/stream/
 * stop_record.py restarts_fault, whose rules these are): of "error", how many more times
 * the launcher (torchrun --max_restarts) restarts the failed run, which resumes. Read
 * by the close (stop_record.c) and the predictor (missing_dir.c) alike. */
#ifndef MT_RESTARTS_LEFT_H
#define MT_RESTARTS_LEFT_H

#include <stdbool.h>
#include <stdint.h>

#include "json.h"

#define MT_MAX_RESTARTS_LEFT 2147483647u /* stop_record.py MAX_RESTARTS_LEFT */

/* `left` (the reason's member, NULL: absent) as a count: an integer from 0 to
 * MT_MAX_RESTARTS_LEFT ("-0" too, as Python reads it), else 0 with *bad set (present
 * and not such an integer: a word, stop_record.py restarts_fault). */
static inline uint32_t mt_restarts_left(const mt_json_member *left, bool *bad) {
    bool ok = left != NULL && left->kind == MT_JSON_NUMBER && left->integer &&
              ((left->exact && left->u64 <= MT_MAX_RESTARTS_LEFT) || left->number == 0.0);
    *bad = left != NULL && !ok;
    return ok && left->exact ? (uint32_t)left->u64 : 0;
}

#endif
