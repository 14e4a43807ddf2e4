/* unit_restarts_word.c: the C unit test (CTest) of the invalid-restarts_left word said
 * once per client process and record file (restarts_word.h), as the Python client says
 * it (tests/client/test_restarts_word_once_per_process.py): three reads of one record
 * with looks of their own (two clients' closes, a third's send: no flag shared) say it
 * once on stderr; a second file's record says its own once. Failed before: each look said
 * it (once per client). A later run's record at rank 0's path (the trainer run again on
 * the same directory: a new run id, its own invalid restarts_left) says its own word:
 * failed before (keyed by path alone, it was read silently). The oracle: the count of the
 * words on stderr. Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "close_checks.h"
#include "internal.h"
#include "unit_check.h"

static char dir[] = "/tmp/mt_unit_restarts_word_XXXXXX";
static const char *endpoint = "tcp://127.0.0.1:9";
static const char *word = "its restarts_left is not an integer";

/* rank_R.json of `run`'s, stopped with an error whose restarts_left is "x". */
static void put(int rank, const char *run) {
    char path[256];
    snprintf(path, sizeof path, "%s/rank_%d.json", dir, rank);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (f == NULL) return;
    fprintf(f, "{\"stopped\": true, \"endpoint\": \"%s\", \"stop_record\": {\"version\": 1, "
               "\"run_id\": \"%s\", \"reason\": {\"code\": \"error\", \"message\": \"boom\", "
               "\"restarts_left\": \"x\"}, \"finished\": [], \"byes\": [], \"complete\": true}}",
            endpoint, run);
    fclose(f);
}

/* How many times `text` holds the word. */
static int words_in(const char *text) {
    int n = 0;
    for (const char *at = strstr(text, word); at != NULL; at = strstr(at + 1, word)) ++n;
    return n;
}

/* The reads' stderr, from the file it was sent to. */
static char *read_all(const char *path) {
    FILE *f = fopen(path, "r");
    static char text[65536];
    size_t n = f == NULL ? 0 : fread(text, 1, sizeof text - 1, f);
    if (f != NULL) fclose(f);
    text[n] = '\0';
    return text;
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    put(0, "run-a"), put(1, "run-a");
    char err_path[300];
    snprintf(err_path, sizeof err_path, "%s/stderr", dir);
    fflush(stderr);
    int saved = dup(2), to = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(saved >= 0 && to >= 0 && dup2(to, 2) == 2);
    mt_stop_sent sent = {1, 0, 0, true};
    for (int read = 0; read < 3; ++read) { /* (three reads of rank 0's, looks of their own) */
        mt_stop_look look = {0};
        mt_stop_said said;
        memset(&said, 0, sizeof said);
        mt_stop_record_decide(dir, 0, endpoint, "run-a", 3 + (uint64_t)(read == 2), 0, &sent,
                              &look, &said);
    }
    mt_stop_look other = {0};
    mt_stop_said said;
    memset(&said, 0, sizeof said);
    mt_stop_record_decide(dir, 1, endpoint, "run-a", 3, 0, &sent, &other, &said);
    put(0, "run-b"); /* (the trainer run again on the same directory, failing again) */
    for (int read = 0; read < 2; ++read) { /* (a client of run-b's, twice: said once) */
        mt_stop_look look = {0};
        memset(&said, 0, sizeof said);
        mt_stop_record_decide(dir, 0, endpoint, "run-b", 4, 0, &sent, &look, &said);
    }
    fflush(stderr);
    dup2(saved, 2), close(saved), close(to);
    const char *text = read_all(err_path);
    char first[300];
    snprintf(first, sizeof first, "%s/rank_0.json: %s", dir, word);
    CHECK(words_in(text) == 3);       /* (one per file and run) */
    CHECK(strstr(text, first) != NULL); /* (rank 0's, once) */
    if (failures) fprintf(stderr, "its stderr:\n%s", text);
    char path[300];
    for (int k = 0; k < 2; ++k) {
        snprintf(path, sizeof path, "%s/rank_%d.json", dir, k);
        unlink(path);
    }
    unlink(err_path);
    rmdir(dir);
    return unit_report("restarts word: once per process, file and run");
}
