/* restarts_word.h: a stop record's invalid "restarts_left" word (stop_record.c) said once
 * per client process and record (its file and its run id), as the Python client says it
 * (client/stopped.py _RESTARTS_WARNED): whichever read comes first, of whichever client
 * of the process (its sends', its close's, a second client's), says it; a user reads one
 * word per record. The run id tells apart the records of two runs at one path (a trainer
 * run again on the same rendezvous directory: a new run id), both read by a long-lived
 * process (a worker, several simulations). Each client's flag (restarts_said.h) spares
 * its reads the lookup. */
#ifndef MT_RESTARTS_WORD_H
#define MT_RESTARTS_WORD_H

#include <stdbool.h>

/* Whether this is the process's first word of the record of run `run_id` (NULL: a record
 * of no run id) at `path` (then marked said); thread-safe. True when its mark cannot be
 * kept (memory short): a word said again rather than one lost. */
bool mt_restarts_word_first(const char *path, const char *run_id);

#endif
