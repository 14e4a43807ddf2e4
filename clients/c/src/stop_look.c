/* stop_look.c: a predict's lookup that finds no serve file reads rank_0.json and parses it
 * (mt_stop_text, mt_stopped_story: missing_dir.c) at every look, up to 4 a second per
 * waiting request, for as long as a trainer that a resume may follow stays stopped; a
 * preempted trainer's record (its receipts) is tens of KB, one look of a 67 KB record
 * 4 to 8 ms (docs/measured.md, "Design choices"). A stat is microseconds: the file is read and parsed again
 * only when it changed (client/stop_look.py StopLook, the same rule). */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "missing_dir.h"
#include "stop_look.h"

/* Whether `a` and `b` are both NULL or the same string. */
static bool same(const char *a, const char *b) {
    return a == NULL ? b == NULL : b != NULL && strcmp(a, b) == 0;
}

/* Forget what `g` kept (its key and its results). */
static void forget(mt_stop_glance *g) {
    free(g->text), free(g->story.data), free(g->dir), free(g->run_id), free(g->why);
    memset(g, 0, sizeof *g);
}

/* A copy of `s` in *out (NULL stays NULL); false when memory ran out. */
static bool copy(const char *s, char **out) {
    *out = s != NULL ? strdup(s) : NULL;
    return s == NULL || *out != NULL;
}

const mt_stop_glance *mt_stop_glance_at(mt_stop_glance **glance, const char *dir,
                                        const char *run_id, const char *why, bool served) {
    if (*glance == NULL && (*glance = calloc(1, sizeof **glance)) == NULL) return NULL;
    mt_stop_glance *g = *glance;
    char path[4096];
    snprintf(path, sizeof path, "%s/rank_0.json", dir);
    struct stat st;
    bool there = stat(path, &st) == 0;
    long long size = there ? (long long)st.st_size : 0;
    long long mtime_ns = there ? (long long)st.st_mtim.tv_sec * 1000000000LL + st.st_mtim.tv_nsec
                               : 0;
    unsigned long long ino = there ? (unsigned long long)st.st_ino : 0;
    if (there && g->kept && g->size == size && g->mtime_ns == mtime_ns && g->ino == ino &&
        g->served == served && same(g->dir, dir) && same(g->run_id, run_id) &&
        same(g->why, why))
        return g; /* (unchanged: what the last look found) */
    forget(g);
    g->text = mt_stop_text(dir);
    g->stopped = mt_stopped_story(g->text, run_id, why, served, &g->story);
    /* (a file there but not read, being replaced or memory short, or a story short of
     * memory: said as the plain read says it, and read again at the next look) */
    g->kept = there && g->text != NULL && !g->story.oom && copy(dir, &g->dir) &&
              copy(run_id, &g->run_id) && copy(why, &g->why);
    g->served = served, g->size = size, g->mtime_ns = mtime_ns, g->ino = ino;
    return g;
}

void mt_stop_glance_free(mt_stop_glance *glance) {
    if (glance == NULL) return;
    forget(glance);
    free(glance);
}
