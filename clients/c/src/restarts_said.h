/* restarts_said.h: a stop record's invalid "restarts_left" word (stop_record.c, read as
 * 0 with a word) said once per receiver per client, as the Python client says it once:
 * by whichever of this client's reads of that record comes first (a blocked send's, the
 * close's wait, its receipts, the words of a wait that gives up: stop_said.c). Each read
 * has a look of its own (stop_record.c mt_stop_look), whose flag held only within it:
 * the close said the word twice (tests/c/test_c_restarts_word_once.py). The client's flag
 * for receiver r is its sends' look's (c->stop_looks[r], freed with the handshakes, as
 * the endpoints change): a read copies it in before and back after. Once per client
 * process and record file, whichever client reads it (restarts_word.h, since
 * 2026-12-07): this flag spares a client's reads that process-wide lookup. */
#ifndef MT_RESTARTS_SAID_H
#define MT_RESTARTS_SAID_H

#include <stdbool.h>
#include <stdlib.h>

#include "internal.h"

/* The client's flag of receiver r (the sends' looks made if none yet), NULL when it has
 * none (out of memory, r beyond its endpoints: the look's own flag then). */
static inline bool *mt_restarts_said(mt_client *c, size_t r) {
    if (r >= c->n_endpoints) return NULL;
    if (c->stop_looks == NULL) c->stop_looks = calloc(c->n_endpoints, sizeof *c->stop_looks);
    return c->stop_looks == NULL ? NULL : &c->stop_looks[r].restarts_warned;
}

/* Before a read of receiver r's record with `look`: said already by this client? */
static inline void mt_restarts_said_load(mt_client *c, size_t r, mt_stop_look *look) {
    bool *said = mt_restarts_said(c, r);
    if (said != NULL) look->restarts_warned = look->restarts_warned || *said;
}

/* After that read: whether it said the word, kept for the client's next reads. */
static inline void mt_restarts_said_keep(mt_client *c, size_t r, const mt_stop_look *look) {
    bool *said = mt_restarts_said(c, r);
    if (said != NULL) *said = *said || look->restarts_warned;
}

#endif
