/* unit_stop_look.c: the C unit test (CTest) of a predict lookup's look at rank_0.json
 * (stop_look.c mt_stop_glance_at; client/stop_look.py StopLook, whose test,
 * tests/client/test_stop_look.py, this follows): every look says what the plain read says
 * (mt_stop_text, mt_stopped_story: the oracle) across every change of the file (replaced
 * by a rename, rewritten in place, the same size with a later mtime, half-written,
 * removed) and of the story's other arguments; and an unchanged file is not read again: a
 * text rewritten in place under its old size and mtime (the one change a stat cannot
 * see) is not what the look says, one replaced by a rename with the same text is read
 * again. Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"
#include "missing_dir.h"
#include "stop_look.h"
#include "unit_check.h"

static char dir[] = "/tmp/mt_unit_stop_look_XXXXXX";
static char path[256], aside[256];

/* `text` written to `at` (created or truncated in place). */
static void put(const char *at, const char *text) {
    FILE *f = fopen(at, "w");
    CHECK(f != NULL);
    if (f == NULL) return;
    fputs(text, f);
    fclose(f);
}

/* A stopped rank_0.json of run-a's, with its record's reason (`code`, `message`). */
static void record(const char *at, const char *code, const char *message) {
    char text[512];
    snprintf(text, sizeof text,
             "{\"stopped\": true, \"run_id\": \"run-a\", \"stop_record\": {\"reason\": "
             "{\"code\": \"%s\", \"message\": \"%s\"}}}",
             code, message);
    put(at, text);
}

/* `text` written aside then renamed over rank_0.json (as a trainer writes it: a new
 * inode). */
static void replace(const char *code, const char *message) {
    record(aside, code, message);
    CHECK(rename(aside, path) == 0);
}

/* Whether the look says what the plain read says, with these arguments. */
static bool same(mt_stop_glance **g, const char *run_id, const char *why, bool served) {
    const mt_stop_glance *seen = mt_stop_glance_at(g, dir, run_id, why, served);
    char *text = mt_stop_text(dir);
    mt_buf story = {0};
    int stopped = mt_stopped_story(text, run_id, why, served, &story);
    bool ok = seen != NULL && stopped == seen->stopped &&
              (text == NULL ? seen->text == NULL
                            : seen->text != NULL && strcmp(text, seen->text) == 0) &&
              story.len == seen->story.len &&
              (story.len == 0 || memcmp(story.data, seen->story.data, story.len) == 0);
    if (!ok)
        fprintf(stderr, "look: [%s] %d; plain read: [%s] %d\n",
                seen && seen->story.data ? seen->story.data : "", seen ? seen->stopped : -1,
                story.data ? story.data : "", stopped);
    free(text);
    free(story.data);
    return ok;
}

/* Every look says what the plain read says. */
static void every_change(void) {
    mt_stop_glance *g = NULL;
    CHECK(same(&g, "run-a", MT_NO_SERVER, false)); /* (no file) */
    replace("preempted", "SIGTERM");
    CHECK(same(&g, "run-a", MT_NO_SERVER, false));
    CHECK(same(&g, "run-a", MT_NO_SERVER, false)); /* (unchanged: kept) */
    CHECK(same(&g, "run-b", MT_NO_SERVER, false)); /* (another run asking: its own story) */
    CHECK(same(&g, NULL, MT_NO_SERVER, false));    /* (any run's) */
    CHECK(same(&g, "run-a", "no trainer serves predictions there (yet)", true));
    CHECK(same(&g, "run-a", "rank 1 of 2 does not serve (yet)", false));
    replace("end", "max_steps 5 reached");
    CHECK(same(&g, "run-a", MT_NO_SERVER, false));
    record(path, "end", "end of stream, AAAA"); /* (in place: the same inode) */
    CHECK(same(&g, "run-a", MT_NO_SERVER, false));
    struct stat st;
    CHECK(stat(path, &st) == 0);
    record(path, "end", "end of stream, BBBB"); /* (the same size too) */
    struct timespec later[2] = {st.st_atim, st.st_mtim};
    later[1].tv_nsec += later[1].tv_nsec < 999000000 ? 1000000 : -1000000; /* (1 ms on) */
    if (later[1].tv_nsec < st.st_mtim.tv_nsec) later[1].tv_sec += 1;
    CHECK(utimensat(AT_FDCWD, path, later, 0) == 0); /* (its mtime later) */
    CHECK(same(&g, "run-a", MT_NO_SERVER, false));
    put(path, "{not json"); /* (being written) */
    CHECK(same(&g, "run-a", MT_NO_SERVER, false));
    CHECK(unlink(path) == 0);
    CHECK(same(&g, "run-a", MT_NO_SERVER, false));
    mt_stop_glance_free(g);
}

/* An unchanged file is not read again; one replaced (its stat changed) is. */
static void not_read_again(void) {
    mt_stop_glance *g = NULL;
    replace("preempted", "SIGTERM");
    const mt_stop_glance *first = mt_stop_glance_at(&g, dir, "run-a", MT_NO_SERVER, false);
    CHECK(first != NULL && first->stopped == 1);
    char *kept = first != NULL ? strdup(first->story.data) : NULL;
    CHECK(kept != NULL && strstr(kept, "(preempted: SIGTERM; ") != NULL);
    struct stat st;
    CHECK(stat(path, &st) == 0);
    record(path, "preempted", "SIGKILL"); /* (in place, the same size) */
    struct timespec as_before[2] = {st.st_atim, st.st_mtim};
    CHECK(utimensat(AT_FDCWD, path, as_before, 0) == 0); /* (and the same mtime) */
    for (int k = 0; k < 5; ++k) {
        const mt_stop_glance *seen = mt_stop_glance_at(&g, dir, "run-a", MT_NO_SERVER, false);
        CHECK(seen != NULL && kept != NULL && strcmp(seen->story.data, kept) == 0);
    }
    replace("preempted", "SIGTERM"); /* (the same text as first: a new file) */
    record(path, "preempted", "SIGKILL"); /* (and rewritten: read at the next look) */
    const mt_stop_glance *seen = mt_stop_glance_at(&g, dir, "run-a", MT_NO_SERVER, false);
    CHECK(seen != NULL && strstr(seen->story.data, "(preempted: SIGKILL; ") != NULL);
    free(kept);
    mt_stop_glance_free(g);
}

int main(void) {
    CHECK(mkdtemp(dir) != NULL);
    snprintf(path, sizeof path, "%s/rank_0.json", dir);
    snprintf(aside, sizeof aside, "%s/aside", dir);
    every_change();
    not_read_again();
    unlink(path), unlink(aside), rmdir(dir);
    return unit_report("unit_stop_look: ok");
}
