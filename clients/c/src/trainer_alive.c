/* trainer_alive.c: whether the trainer that wrote a rendezvous file still runs
 * (melissa_trainer/stream/trainer_process.py, the same rule and words). A trainer killed
 * with kill -9 leaves its rank_N.json files, not marked stopped; a receiver publishes its
 * process beside its endpoint: "pid", "pid_start" (/proc/PID/stat's 22nd field, clock
 * ticks after boot: a reused pid has another) and "pid_scope" ("BOOT PIDNS": the boot id
 * and the pid namespace, in which alone the pid names it). At its start a client in the
 * same scope does not take a file whose process is gone (no such pid, a zombie, another
 * start time): it waits for a trainer to publish there again, as for a file marked
 * stopped (a trainer being resumed rewrites the files), and says why. Another machine or
 * pid namespace, no /proc, or a file without these keys (an older trainer): the pid is
 * not checked; its endpoint is (trainer_listens.c: a killed trainer's port refuses). */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "host_scope.h"
#include "internal.h"

bool mt_own_pid_scope(char *out, size_t size) {
    char boot[128], ns[128];
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (f == NULL) return false;
    size_t n = fread(boot, 1, sizeof boot - 1, f);
    fclose(f);
    boot[n] = '\0';
    const char *b = boot; /* (str.strip()) */
    while (isspace((unsigned char)*b)) ++b;
    while (n > 0 && isspace((unsigned char)boot[n - 1])) boot[--n] = '\0';
    ssize_t k = readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
    if (k < 0) return false;
    ns[k] = '\0';
    snprintf(out, size, "%s %s", b, ns);
    return true;
}

/* The start time of `pid` (/proc/PID/stat field 22) in *start, false when it does not
 * run (no such process, a zombie) or cannot be read (trainer_process.py started). */
static bool started(long long pid, unsigned long long *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%lld/stat", pid);
    FILE *f = fopen(path, "r");
    if (f == NULL) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strrchr(buf, ')'); /* (a name may hold ") ") */
    if (p == NULL) return false;
    p += 1;
    char state = 0;
    for (int field = 0; field < 20; ++field) { /* fields after the name: state is the 1st */
        while (*p == ' ') ++p;
        if (*p == '\0') return false;
        if (field == 0) state = *p;
        if (field == 19) return state != 'Z' && state != 'X' && sscanf(p, "%llu", start) == 1;
        while (*p != ' ' && *p != '\0') ++p;
    }
    return false;
}

int mt_trainer_runs(const mt_json_member *m, size_t n, const char *mine, long long *pid_out) {
    long long pid = 0;
    int verdict = -1;
    unsigned long long start = 0, now = 0;
    bool has_start = false, same = false;
    for (size_t k = 0; k < n; ++k) {
        bool exact = m[k].kind == MT_JSON_NUMBER && m[k].integer && m[k].exact;
        if (strcmp(m[k].key, "pid") == 0 && exact && m[k].u64 <= 0x7fffffff)
            pid = (long long)m[k].u64;
        if (strcmp(m[k].key, "pid_start") == 0 && exact) start = m[k].u64, has_start = true;
        if (strcmp(m[k].key, "pid_scope") == 0 && m[k].kind == MT_JSON_STRING)
            same = mine != NULL && strcmp(m[k].string, mine) == 0;
    }
    if (pid > 0 && has_start && same) {
        if (kill((pid_t)pid, 0) != 0 && errno == ESRCH) verdict = 0;
        else {
            char proc[64];
            snprintf(proc, sizeof proc, "/proc/%lld/stat", pid);
            FILE *f = fopen(proc, "r"); /* (hidden by hidepid: cannot tell more) */
            if (f != NULL) {
                fclose(f);
                verdict = started(pid, &now) && now == start;
            }
        }
    }
    *pid_out = pid;
    return verdict;
}

void mt_gone_words(mt_buf *problem, const char *name, long long pid) {
    mt_buf_printf(problem,
                  "%s: its trainer (pid %lld, on this machine) is gone without marking it "
                  "stopped (killed: kill -9, out of memory?): start the trainer first "
                  "(resumed: --resume_from_checkpoint latest), or point "
                  "MELISSA_TRAINER_RENDEZVOUS at the running trainer's "
                  "{output_dir}/rendezvous",
                  name, pid);
}

/* "RUN\nENDPOINT\nPID" of rank `r`'s file (trainer_listens.py version), or NULL. */
static char *version_of(const mt_rendezvous *rv, size_t r, long long pid) {
    mt_buf key = {0};
    mt_buf_printf(&key, "%s\n%s\n%lld", rv->run_id != NULL ? rv->run_id : "", rv->endpoints[r],
                  pid);
    if (key.oom) free(key.data);
    return key.oom ? NULL : key.data;
}

static bool heard_of(const mt_heard *heard, const char *key) {
    for (size_t k = 0; heard != NULL && key != NULL && k < heard->n; ++k)
        if (strcmp(heard->keys[k], key) == 0) return true;
    return false;
}

/* `key` (taken: freed here when not kept) added to `heard`. */
static void hear(mt_heard *heard, char *key) {
    if (heard == NULL || key == NULL || heard_of(heard, key)) {
        free(key);
        return;
    }
    if (heard->n == heard->cap) {
        size_t cap = heard->cap ? 2 * heard->cap : 8;
        char **grown = realloc(heard->keys, cap * sizeof *grown);
        if (grown == NULL) { /* (not kept: dialled again at the next look, as before) */
            free(key);
            return;
        }
        heard->keys = grown, heard->cap = cap;
    }
    heard->keys[heard->n++] = key;
}

void mt_heard_free(mt_heard *heard) {
    for (size_t k = 0; k < heard->n; ++k) free(heard->keys[k]);
    free(heard->keys);
    heard->keys = NULL, heard->n = heard->cap = 0;
}

/* Dials the endpoints of `rv` marked `asked` (trainer_listens.c): each refused one's words
 * appended to `problem`, each not refused heard. Returns whether one was refused. */
static bool dial(const mt_rendezvous *rv, const long long *pids, const bool *asked,
                 bool *refused, mt_heard *heard, mt_buf *problem) {
    bool any = false;
    mt_listens_refused(rv->endpoints, rv->keys, asked, rv->n, refused);
    for (size_t r = 0; r < rv->n; ++r) {
        if (asked[r] && !refused[r]) hear(heard, version_of(rv, r, pids[r]));
        if (!refused[r]) continue;
        mt_listens_words(problem, r, rv->endpoints[r], pids[r], rv->hosts[r]);
        any = true;
    }
    return any;
}

/* The files are read once (mt_rendezvous_look, `alive`: a gone trainer's refused there,
 * as Python, beside a rank missing), their endpoints and processes from the same reading
 * (pids, runs): a second read of the processes had a resumed trainer's rewrite landing
 * between the two check the live new trainer and take the killed one's endpoint (hrev4),
 * and a third, which took a reading only if it named the same endpoints, read each file
 * three times where Python reads it once. */
mt_status mt_rendezvous_read_live(const char *dir, mt_rendezvous *out, mt_buf *problem,
                                  mt_heard *heard) {
    mt_status st = mt_rendezvous_look(dir, out, problem, false, true);
    if (st != MT_OK) return st;
    size_t n = out->n;
    const long long *pids = out->pids;
    bool *asked = calloc(n, sizeof *asked), *refused = calloc(n, sizeof *refused);
    bool *skipped = calloc(n, sizeof *skipped); /* (heard at an earlier look) */
    if (asked == NULL || refused == NULL || skipped == NULL) {
        free(asked), free(skipped), free(refused);
        mt_rendezvous_free(out);
        return MT_ENOMEM;
    }
    bool any = false, again = false;
    for (size_t r = 0; r < n; ++r) { /* (runs 0, a gone trainer's: refused by the look) */
        if (out->runs[r] >= 0 || strncmp(out->endpoints[r], "tcp://", 6) != 0) continue;
        mt_buf far = {0}; /* (out of reach: said at once by mt_rendezvous_reach, not here) */
        int why = mt_scope_why(out->endpoints[r], out->hosts[r], out->scopes[r],
                               &MT_RECEIVER, &far);
        free(far.data);
        char *key = version_of(out, r, pids[r]); /* (not refused before: not dialled) */
        bool heard_before = heard_of(heard, key);
        free(key);
        asked[r] = why == 0 && !heard_before, any = any || asked[r];
        skipped[r] = why == 0 && heard_before, again = again || skipped[r];
    }
    bool dead = any && dial(out, pids, asked, refused, heard, problem);
    /* The files about to be taken: the ranks heard at an earlier look (while another
     * refused) are dialled again, as trainer_listens.py refused_files does: one may have
     * died since, its file unchanged, and its endpoint was taken unchecked. */
    if (!dead && again) dead = dial(out, pids, skipped, refused, heard, problem);
    free(asked), free(skipped), free(refused);
    if (!dead) return MT_OK;
    mt_rendezvous_free(out);
    return MT_ERENDEZVOUS;
}
