/* replay.c: the replay window, copies of the last time steps this rank sent, bounded in
 * bytes, so that it can send them again to a trainer restarted from a checkpoint that
 * lacks them (follow.c; melissa_trainer/client/replay.py is the Python client's).
 *
 * PUSH/PULL acknowledges nothing, and ZeroMQ drops what it had queued for a trainer that
 * died: a step sent may never have reached the checkpoint the trainer resumes from. A
 * step's row holds every field's part of this rank (at the field's replay_at); the rows
 * form a ring of max_bytes / (row_bytes + 8) rows (the copies and each row's step index
 * within the bound), allocated at the first step kept. The oldest step is overwritten
 * when the ring is full; a step larger than the bound is not kept at all. A step sent
 * again (the same time step later) takes its row again. Not thread-safe: the client's
 * thread. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

void mt_replay_init(mt_replay *w, uint64_t max_bytes, size_t row_bytes) {
    mt_replay_free(w);
    w->max_bytes = max_bytes;
    w->row_bytes = row_bytes;
    uint64_t per_row = (uint64_t)row_bytes + sizeof(uint64_t);
    uint64_t rows = max_bytes / per_row;
    w->rows = rows > (uint64_t)(SIZE_MAX / per_row) ? (size_t)(SIZE_MAX / per_row) : (size_t)rows;
}

void mt_replay_free(mt_replay *w) {
    free(w->data);
    free(w->step_at);
    memset(w, 0, sizeof *w);
}

/* The row of `step` among those used, or w->rows if none (a linear look: only for a
 * step not after the last one begun, which a solver does not usually send). */
static size_t row_of(const mt_replay *w, uint64_t step) {
    for (size_t r = 0; r < w->used; ++r)
        if (w->step_at[r] == step) return r;
    return w->rows;
}

/* Take a row for step `step`: true, or false (none fits, no memory). */
static bool begin(mt_replay *w, uint64_t step) {
    w->open = false;
    if (w->rows == 0) {
        w->dropped++;
        return false;
    }
    if (w->data == NULL) {
        /* (rows * row_bytes <= max_bytes: no overflow; a zero-byte row still indexes) */
        w->data = malloc(w->rows * w->row_bytes > 0 ? w->rows * w->row_bytes : 1);
        w->step_at = malloc(w->rows * sizeof *w->step_at);
        if (w->data == NULL || w->step_at == NULL) {
            free(w->data), free(w->step_at);
            w->data = NULL, w->step_at = NULL;
            w->dropped++;
            return false;
        }
    }
    size_t row = w->used > 0 && step <= w->last ? row_of(w, step) : w->rows;
    if (row == w->rows) {
        row = w->next;
        w->next = row + 1 < w->rows ? row + 1 : 0;
        if (row < w->used) w->dropped++; /* (the oldest step, overwritten) */
        else w->used = row + 1;
        w->step_at[row] = step;
    }
    if (w->used == 1 || step > w->last) w->last = step;
    w->open = true;
    w->open_step = step;
    w->open_row = row;
    return true;
}

bool mt_replay_put(mt_replay *w, uint64_t step, size_t offset, const void *data, size_t n) {
    if (w->max_bytes == 0) return false;
    if (!(w->open && w->open_step == step) && !begin(w, step)) return false;
    if (offset > w->row_bytes || n > w->row_bytes - offset) return false; /* (a caller bug) */
    if (n > 0) memcpy(w->data + w->open_row * w->row_bytes + offset, data, n);
    return true;
}

static int by_step(const void *a, const void *b) {
    uint64_t x = ((const mt_replay_entry *)a)->step, y = ((const mt_replay_entry *)b)->step;
    return (x > y) - (x < y);
}

size_t mt_replay_sorted(const mt_replay *w, mt_replay_entry **out) {
    *out = NULL;
    if (w->used == 0) return 0;
    mt_replay_entry *e = malloc(w->used * sizeof *e);
    if (e == NULL) return (size_t)-1;
    for (size_t r = 0; r < w->used; ++r) e[r] = (mt_replay_entry){w->step_at[r], r};
    qsort(e, w->used, sizeof *e, by_step);
    *out = e;
    return w->used;
}

const uint8_t *mt_replay_find(const mt_replay *w, const mt_replay_entry *sorted, size_t n,
                              uint64_t step) {
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (sorted[mid].step < step) lo = mid + 1;
        else hi = mid;
    }
    if (lo == n || sorted[lo].step != step) return NULL;
    return w->data + sorted[lo].row * w->row_bytes;
}
