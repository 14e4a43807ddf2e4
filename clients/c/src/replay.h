/* replay.h: the replay window of the C client (replay.c; follow.c sends from it). Not
 * installed. */
#ifndef MT_REPLAY_H
#define MT_REPLAY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The replay window: copies of the last steps this rank sent, bounded in bytes,
 * sent again to a trainer restarted from a checkpoint that lacks them (follow.c). One row
 * per step: every field's part, at its replay_at. */
typedef struct mt_replay {
    uint64_t max_bytes;  /* the bound (0: no window) */
    size_t row_bytes;    /* one step's parts */
    size_t rows;         /* steps it can hold (0: none fits) */
    uint8_t *data;       /* rows * row_bytes, allocated at the first step kept */
    uint64_t *step_at;   /* row -> step (rows used: the first `used`) */
    size_t used, next;   /* rows holding a step; the row the next new step takes */
    bool open;           /* a row is being filled: the step `open_step` in `open_row` */
    uint64_t open_step;
    size_t open_row;
    uint64_t last;       /* the last step begun (steps usually grow: no search) */
    uint64_t dropped;    /* steps overwritten, or never kept (none fits) */
} mt_replay;

/* Bound max_bytes (0: none), rows of row_bytes; nothing allocated yet. */
void mt_replay_init(mt_replay *w, uint64_t max_bytes, size_t row_bytes);
void mt_replay_free(mt_replay *w);
/* Copy n bytes of `step` at `offset` in its row (a new step takes a row: the oldest step's
 * once full, the same row if it was kept already). Returns false if the step is not kept
 * (none fits, or no memory: counted in dropped). */
bool mt_replay_put(mt_replay *w, uint64_t step, size_t offset, const void *data, size_t n);
/* One step kept, and its row. */
typedef struct mt_replay_entry {
    uint64_t step;
    size_t row;
} mt_replay_entry;
/* The steps kept, sorted, into *out (malloc'd, NULL when none): their count, or
 * (size_t)-1 without memory. */
size_t mt_replay_sorted(const mt_replay *w, mt_replay_entry **out);
/* The row of `step` in `sorted` (n entries), or NULL if the window lacks it. */
const uint8_t *mt_replay_find(const mt_replay *w, const mt_replay_entry *sorted, size_t n,
                              uint64_t step);

#endif
