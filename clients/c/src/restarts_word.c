/* restarts_word.c: the record files whose invalid restarts_left word this process has
 * said (restarts_word.h). A few files per process (one per receiver of the trainers its
 * clients stream to): a list searched in order, kept until the process exits. */
#define _POSIX_C_SOURCE 200809L
#include "restarts_word.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t said_mu = PTHREAD_MUTEX_INITIALIZER;
static char **said = NULL; /* (the paths said, `n_said` of `cap_said`) */
static size_t n_said = 0, cap_said = 0;

bool mt_restarts_word_first(const char *path) {
    bool first = true;
    pthread_mutex_lock(&said_mu);
    for (size_t i = 0; i < n_said && first; ++i) first = strcmp(said[i], path) != 0;
    if (first) {
        if (n_said == cap_said) {
            size_t cap = cap_said ? 2 * cap_said : 8;
            char **grown = realloc(said, cap * sizeof *grown);
            if (grown != NULL) said = grown, cap_said = cap;
        }
        char *copy = n_said < cap_said ? strdup(path) : NULL;
        if (copy != NULL) said[n_said++] = copy;
    }
    pthread_mutex_unlock(&said_mu);
    return first;
}
