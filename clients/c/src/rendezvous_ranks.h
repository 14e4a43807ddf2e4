/* rendezvous_ranks.h: the ranks one look at a rendezvous directory found (rendezvous.c),
 * held one entry per rank file read, never one per rank of a file's world_size (a corrupt
 * file's world_size 10^12, or a rank_999999999.json, had the client allocate and list
 * every rank up to it), and the bounds of a file's "rank" and "world_size"
 * (rendezvous_ranks.c; Python's melissa_trainer/stream/rank_bounds.py, word for word). */
#ifndef MT_RENDEZVOUS_RANKS_H
#define MT_RENDEZVOUS_RANKS_H

#include "internal.h"

/* The largest world_size a rank file may name, 10^MT_RANK_DIGITS (rank_bounds.py
 * MAX_WORLD), and the missing ranks listed at most, the others counted (MISSING_SHOWN). */
#define MT_MAX_WORLD 1000000000LL
#define MT_MISSING_SHOWN 10

/* What one rank file taken (or of a trainer gone) said. */
typedef struct {
    long long rank;
    char *name;   /* the file's name: of two names of a rank (rank_01.json), the last taken */
    char *endpoint; /* NULL: not taken (its trainer is gone, `gone`) */
    long long world;
    char *run_id; /* NULL: the file has none (an older trainer) */
    char *key;    /* the receiver's CURVE public key; NULL: the file has none (no CURVE) */
    char *follow; /* its follow socket (docs/protocol.md 17, 17a); NULL: none published */
    bool receipts; /* 13 (RECEIPT_QUERY) in its "follow_kinds" (docs/protocol.md 17b) */
    bool routing;  /* "routing": "simulation_step" (docs/protocol.md 2) */
    char *kept;    /* "routed_t_mod_w": the raw JSON list, or NULL (docs/protocol.md 3) */
    char *host, *scope; /* "host", "loopback_scope" (strings; NULL: none: host_scope.c) */
    bool gone; /* a file of the rank's is of a trainer known gone: not "missing" */
    long long pid; int runs; /* "pid" (0: none), whether it runs (mt_trainer_runs) */
} mt_rank_entry;

/* The entries of one look, as many as its files (zeroed to start; mt_ranks_free). */
typedef struct {
    mt_rank_entry *at;
    size_t n, cap;
} mt_ranks;

/* A new zeroed entry of `rank` for the file `name` (copied) at the end, or NULL: no memory. */
mt_rank_entry *mt_ranks_add(mt_ranks *ranks, long long rank, const char *name);
/* Sorted by rank, each rank once: its last file by name taken (Python's dict, filled in
 * rank then name order: endpoints.py _read_rendezvous), `gone` if any of its files is. */
void mt_ranks_settle(mt_ranks *ranks);
void mt_ranks_free(mt_ranks *ranks);
/* The world_size of the file `text` (its members `m`) named of rank `file_rank`, 1 to
 * MT_MAX_WORLD, when its "world_size" and "rank" are within bounds (a whole number, the
 * name's rank, under it); 0: out of bounds, why appended to `why` ("its world_size
 * 1000000000000 is over 1000000000: ...", values as Python's repr: json_repr.c); -1: a
 * key is missing (the file is invalid: said by the caller). Never casts a number out of
 * range. */
long long mt_rank_bounds(const char *text, const mt_json_member *m, size_t n,
                         long long file_rank, mt_buf *why);
/* Whether ranks 0 .. world-1 miss one (neither taken nor gone) in the settled `ranks`;
 * if so, and `words` is not NULL, "world_size W, ranks [0, 2] missing" appended, the
 * first MT_MISSING_SHOWN ranks and the count past that ("ranks [1, 2, 3, 4, 5, 6, 7, 8,
 * 9, 10, ... (999999 in all)] missing"): steps over as many ranks as `ranks` holds and
 * MT_MISSING_SHOWN more, whatever `world`. */
bool mt_ranks_missing(const mt_ranks *ranks, long long world, mt_buf *words);
/* The settled `ranks`, ranks 0 .. world-1 all taken, moved into *out (MT_OK), or
 * MT_ENOMEM (out freed). */
mt_status mt_ranks_take(mt_ranks *ranks, long long world, mt_rendezvous *out);

#endif
