/* unit_predict_ended.c: the C unit test (CTest) of the warning a lookup of a serving
 * endpoint gives once no serve file has been there for NOTICE_AFTER (3) s of lookups
 * (missing_dir.c mt_unserved_check, through serve.c mt_serve_resolve): a run that ended
 * there fails each request at once, so no request waits and none is warned of as waiting
 * up to its timeout; a trainer a resume may follow (preempted) is, on the same clock.
 * Three requests, the clock of the MT_TESTING build moved 2 s between them (past the
 * warning's 3 s: tests/c/test_c_predict_stopped_note.py slept 2 s twice for it). stderr
 * is read back from a file. Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "serve.h"
#include "unit_check.h"

/* What three requests of `timeout` s of a client of run "run-a" say on stderr (malloc'd)
 * in `dir`, whose rank_0.json is run-a's, stopped with reason `code`, the clock moved 2 s
 * after each; *at_once: how many failed before their deadline. */
static char *three_requests(const char *dir, const char *code, double timeout, int *at_once) {
    char path[512], err_path[512];
    snprintf(path, sizeof path, "%s/rank_0.json", dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    fprintf(f, "{\"stopped\": true, \"run_id\": \"run-a\", \"stop_record\": {\"reason\": "
               "{\"code\": \"%s\", \"message\": \"max_steps 5 reached\"}}}", code);
    fclose(f);
    snprintf(err_path, sizeof err_path, "%s/stderr_%s.txt", dir, code);
    mt_client *c;
    CHECK(mt_client_create(&c) == MT_OK);
    CHECK(mt_set_rendezvous(c, dir, 1.0) == MT_OK);
    CHECK(mt_set_simulation_id(c, 3) == MT_OK);
    c->run_id = strdup("run-a"); /* (set at a start: none here, no trainer) */
    fflush(stderr);
    int saved = dup(2), fd = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(fd, 2);
    *at_once = 0;
    for (int i = 0; i < 3; ++i) {
        mt_serve_entry out;
        double deadline = mt_now() + timeout;
        mt_status st = mt_serve_resolve(c, deadline, timeout, &out);
        if (st == MT_OK) mt_serve_entry_free(&out);
        *at_once += st != MT_OK && mt_now() < deadline;
        mt_testing_advance_clock(2.0);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(fd);
    close(saved);
    mt_client_abort(c);
    f = fopen(err_path, "r");
    char *said = calloc(1, 8192);
    if (f != NULL && said != NULL) {
        size_t n = fread(said, 1, 8191, f);
        said[n] = '\0';
    }
    if (f != NULL) fclose(f);
    return said;
}

int main(void) {
    char dir[] = "/tmp/mt_unit_predict_ended_XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    unsetenv("MELISSA_TRAINER_SERVE_ENDPOINTS");
    unsetenv("MELISSA_TRAINER_RENDEZVOUS");
    int at_once = 0;
    char *said = three_requests(dir, "end", 120, &at_once);
    CHECK(at_once == 3); /* (each failed at once: none waited) */
    CHECK(said != NULL && strstr(said, "mt_predict:") == NULL); /* (none warned of) */
    if (said != NULL && strstr(said, "mt_predict:") != NULL) fprintf(stderr, "said: %s", said);
    free(said);
    /* The oracle that the clock moved past the warning: a preempted trainer, waited for
     * (each request to its deadline: 0 s, the real wait none), is warned of. */
    said = three_requests(dir, "preempted", 0, &at_once);
    CHECK(at_once == 0);
    CHECK(said != NULL && strstr(said, "mt_predict:") != NULL &&
          strstr(said, "each request waits up to its timeout") != NULL);
    free(said);
    char path[512];
    const char *names[] = {"rank_0.json", "stderr_end.txt", "stderr_preempted.txt"};
    for (int i = 0; i < 3; ++i) {
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        unlink(path);
    }
    rmdir(dir);
    return unit_report("unit_predict_ended: ok");
}
