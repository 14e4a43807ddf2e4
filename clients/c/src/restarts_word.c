/* restarts_word.c: the records whose invalid restarts_left word this process has said,
 * by file and run id (restarts_word.h). A few per process (one per receiver and run of
 * the trainers its clients stream to): a list searched in order, kept until the process
 * exits. */
#define _POSIX_C_SOURCE 200809L
#include "restarts_word.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t said_mu = PTHREAD_MUTEX_INITIALIZER;
/* (the records said, `n_said` of `cap_said`: "<run id>\n<path>", a run id never holding
 * a newline (letters, digits, '-', '_'), "" for none: one key per path and run) */
static char **said = NULL;
static size_t n_said = 0, cap_said = 0;

bool mt_restarts_word_first(const char *path, const char *run_id) {
    size_t size = strlen(path) + (run_id != NULL ? strlen(run_id) : 0) + 2;
    char *key = malloc(size);
    if (key == NULL) return true; /* (a word said again rather than one lost) */
    snprintf(key, size, "%s\n%s", run_id != NULL ? run_id : "", path);
    bool first = true;
    pthread_mutex_lock(&said_mu);
    for (size_t i = 0; i < n_said && first; ++i) first = strcmp(said[i], key) != 0;
    if (first) {
        if (n_said == cap_said) {
            size_t cap = cap_said ? 2 * cap_said : 8;
            char **grown = realloc(said, cap * sizeof *grown);
            if (grown != NULL) said = grown, cap_said = cap;
        }
        if (n_said < cap_said) said[n_said++] = key, key = NULL;
    }
    pthread_mutex_unlock(&said_mu);
    free(key);
    return first;
}
