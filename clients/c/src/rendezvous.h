/* rendezvous.h: the configuration (env.c) and the rendezvous directory (rendezvous.c). Not
 * installed; internal.h, which every source includes, includes it at its end, after the
 * types it uses. */
#ifndef MT_RENDEZVOUS_H
#define MT_RENDEZVOUS_H

#include "internal.h"

/* env.c */
mt_status mt_resolve_config(mt_client *c);
/* env_names.c: each MELISSA_TRAINER_* variable of the environment that no part of
 * melissa-trainer reads, named with the known one it is like, in the Python client's
 * sentence: on stderr (rank 0, once per process); and, for the "no simulation id" and
 * "no receiver endpoint" errors, "; but SENTENCE" (or "" if none: NULL without memory;
 * free it). */
void mt_env_warn_unknown(const mt_client *c);
char *mt_env_but(void);
/* rendezvous.c: one complete and consistent reading of a rendezvous directory, in rank
 * order: each receiver's endpoint, CURVE key and follow endpoint (NULL: none), whether its
 * follow socket answers RECEIPT_QUERY (13 in "follow_kinds"), the run id (NULL: none),
 * whether a file is marked stopped (read with `stopped_too` only). */
typedef struct mt_rendezvous {
    size_t n;
    char **endpoints, **keys, **follows;
    bool *receipts;
    char *run_id;
    bool stopped;
    bool routing; /* every file says "routing": "simulation_step" (docs/protocol.md 2) */
    char **kept;  /* each file's "routed_t_mod_w" raw JSON text, or NULL (docs/protocol.md 3) */
    char **hosts, **scopes; /* each file's "host" and "loopback_scope" (strings), or NULL */
    long long *pids; /* each file's "pid" (0: none), read with `alive` (else 0) */
    int *runs;       /* whether its trainer runs (mt_trainer_runs: 1, -1; else -1) */
} mt_rendezvous;
/* A rank file's name of more digits (leading zeros aside) is refused unread, as Python's
 * (endpoints.py MAX_RANK_DIGITS): no trainer has a billion ranks. */
#define MT_RANK_DIGITS 9
/* One look at `dir`: MT_OK (*out filled: mt_rendezvous_free), MT_ERENDEZVOUS (not complete,
 * not consistent, or, unless `stopped_too`, a file marked stopped: what is wrong appended
 * to `problem`, whole, each file's words after "; ", unless it is NULL), MT_ENOMEM. */
mt_status mt_rendezvous_read(const char *dir, mt_rendezvous *out, mt_buf *problem,
                             bool stopped_too);
/* mt_rendezvous_read, and with `alive` a file whose trainer is known gone
 * (mt_trainer_runs 0) is not taken either, its words said (mt_gone_words), its rank not
 * "missing" (endpoints.py _read_rendezvous alive_only). Each file's words in rank order
 * (then name), before what is wrong with the directory. */
mt_status mt_rendezvous_look(const char *dir, mt_rendezvous *out, mt_buf *problem,
                             bool stopped_too, bool alive);
/* trainer_alive.c: "BOOT PIDNS" of this process in `out` (trainer_process.py pid_scope),
 * else false; whether the trainer that wrote the rendezvous file of members `m` runs: 1,
 * 0 (gone), -1 (cannot be told here: another scope, `mine` NULL, no keys), its "pid" in
 * *pid (0: none) (trainer_process.py trainer_runs); and why the file `name` of a gone
 * trainer is not taken, "NAME: its trainer (pid PID, ...", appended to `problem`
 * (trainer_process.py gone_words). */
bool mt_own_pid_scope(char *out, size_t size);
int mt_trainer_runs(const mt_json_member *m, size_t n, const char *mine, long long *pid);
void mt_gone_words(mt_buf *problem, const char *name, long long pid);
void mt_rendezvous_free(mt_rendezvous *rv);
/* trainer_alive.c: mt_rendezvous_look (not `stopped_too`, `alive`), and MT_ERENDEZVOUS
 * (rv freed, each such file's words in `problem`) when a file's trainer process, on this
 * machine and pid namespace, is gone ("pid", "pid_start", "pid_scope":
 * trainer_process.py), or when another machine's endpoint refuses (trainer_listens.c):
 * each file read once, as Python's (its endpoint and process from the same reading). */
/* The file versions ("RUN\nENDPOINT\nPID") whose endpoint did not refuse, kept by a
 * caller across its looks at one rendezvous (mt_fetch_endpoints): not dialled again while
 * another refuses, dialled again before the files are taken (trainer_listens.py
 * refused_files' `heard`). Zeroed to start; mt_heard_free. */
typedef struct {
    char **keys;
    size_t n, cap;
} mt_heard;
void mt_heard_free(mt_heard *heard);
mt_status mt_rendezvous_read_live(const char *dir, mt_rendezvous *out, mt_buf *problem,
                                  mt_heard *heard);
/* trainer_listens.c: refused[i], for each endpoint `asked` (tcp://, with its CURVE key or
 * NULL), whether its connection was refused (trainer_listens.py), told within 1 s for
 * all; and the words of a refused rank_R.json (its file's "pid", 0: none, and "host"),
 * appended to `problem` after "; " (trainer_listens.py refused_words). */
void mt_listens_refused(char *const *endpoints, char *const *keys, const bool *asked,
                        size_t n, bool *refused);
void mt_listens_words(mt_buf *problem, size_t rank, const char *endpoint, long long pid,
                      const char *host);
/* Whether a file of `rv` lists `simulation_id` under "routed_t_mod_w": a simulation its
 * receivers hold steps of routed t % W, which keeps that routing (routing.py KEPT). */
bool mt_rendezvous_keeps(const mt_rendezvous *rv, uint64_t simulation_id);
/* rendezvous_wait.c: c->endpoints, c->curve_keys and c->run_id from the rendezvous directory
 * `dir`, polled until complete for up to `timeout` seconds (else MT_ERENDEZVOUS). */
mt_status mt_fetch_endpoints(mt_client *c, const char *dir, double timeout);
/* host_scope.c: MT_OK, or MT_EUNREACHABLE with the Python client's words (host_scope.py
 * out_of_reach, after "rendezvous DIR: ") for the first receiver of `rv`, read from the
 * rendezvous `dir`, whose loopback endpoint this process cannot reach: its file's
 * "loopback_scope" (boot id and network namespace) is not this process's. An entry
 * without one (an older trainer), or no scope readable here, is not checked. */
mt_status mt_rendezvous_reach(mt_client *c, const char *dir, const mt_rendezvous *rv);
/* read_file.c: the whole file at `path`, NUL-terminated (to free), or NULL (it cannot be
 * read, memory ran out, or it is over 4 MiB: a rendezvous file with its stop record is
 * at most about 500 KiB). */
char *mt_read_file(const char *path);
/* stop_record.c: why a stopped rendezvous file's trainer stopped, as its "stop_record"
 * (`record`: the member's raw JSON text, or NULL) says, read leniently (the words only:
 * mt_stop_record_decide checks a record before it decides anything), in `out`, to follow
 * "its trainer ": "ended: the study had its expected_simulations=N and needs no more
 * simulations (...)" (code "end" with an "expected_end"), else "stopped (CODE) (a trainer
 * resumed from its checkpoint publishes again)", CODE "error: MESSAGE" for a failure
 * ("error", "nonfinite"), without "(CODE)" when the record has none (endpoints.py
 * _why_stopped, which says the code alone). */
void mt_stop_record_words(const char *record, char *out, size_t size);
/* 1 to 64 ASCII letters, digits, '-' or '_', one alphanumeric at least (a run id). */
bool mt_valid_run_id(const char *s);
/* MT_OK, or `bad` with "PREFIXendpoint 'E' has no port: give tcp://HOST:PORT (...)" for
 * the first of the comma-separated `text` (each stripped as Python's str.strip) not of a
 * form to connect to (mt_endpoint_fault, env.c). */
mt_status mt_check_endpoints(mt_client *c, const char *text, mt_status bad, const char *prefix);
/* `bad` with "PREFIXendpoints must be like tcp://HOST:PORT, got 'TEXT'" (TEXT quoted as
 * Python's repr, as client/config.py resolve_receivers says it): an item without "://". */
mt_status mt_endpoints_not_like(mt_client *c, const char *text, mt_status bad,
                                const char *prefix);

#endif
