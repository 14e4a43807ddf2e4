/* unit_follow.c: the C unit tests (CTest) of what following a restarted trainer rests
 * on: the replay window (its bound in bytes, the oldest step overwritten, a step sent
 * again taking its row again, the sorted look-up, a step larger than the bound kept not
 * at all), the parsing of a HELD reply (what is rejected) and which steps it says held,
 * and the window's bound from MELISSA_TRAINER_REPLAY_BYTES (external mode only); a
 * launched rerun's attempt number, and what it asks without a rendezvous or on a first
 * attempt (nothing: rerun.c). Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "follow.h"
#include "unit_check.h"

/* Record step t: two "fields" of 4 bytes, each byte (t + field) & 255. */
static bool put(mt_replay *w, uint64_t t) {
    uint8_t a[4], b[4];
    memset(a, (int)(t & 255), sizeof a);
    memset(b, (int)((t + 1) & 255), sizeof b);
    return mt_replay_put(w, t, 0, a, sizeof a) && mt_replay_put(w, t, 4, b, sizeof b);
}

static bool holds(const mt_replay *w, uint64_t t) {
    mt_replay_entry *sorted = NULL;
    size_t n = mt_replay_sorted(w, &sorted);
    const uint8_t *row = n == (size_t)-1 ? NULL : mt_replay_find(w, sorted, n, t);
    bool ok = row != NULL && row[0] == (t & 255) && row[4] == ((t + 1) & 255);
    free(sorted);
    return ok;
}

static void test_window(void) {
    mt_replay w = {0};
    /* 3 rows of 8 bytes and their 8-byte index: 48 bytes (47: 2 rows) */
    mt_replay_init(&w, 48, 8);
    CHECK(w.rows == 3);
    CHECK(w.data == NULL); /* (allocated at the first step) */
    for (uint64_t t = 0; t < 5; ++t) CHECK(put(&w, t));
    CHECK(!holds(&w, 0) && !holds(&w, 1)); /* (the oldest, overwritten) */
    CHECK(holds(&w, 2) && holds(&w, 3) && holds(&w, 4));
    CHECK(w.dropped == 2);
    CHECK(w.used == 3);
    /* a step sent again takes its row again: nothing dropped */
    CHECK(put(&w, 3));
    CHECK(w.dropped == 2 && holds(&w, 2) && holds(&w, 3) && holds(&w, 4));
    /* a step before the last one, not kept: a new row (the oldest, 2, goes) */
    CHECK(put(&w, 1));
    CHECK(holds(&w, 1) && !holds(&w, 2) && holds(&w, 3) && holds(&w, 4));
    mt_replay_entry *sorted = NULL;
    size_t n = mt_replay_sorted(&w, &sorted);
    CHECK(n == 3 && sorted != NULL);
    for (size_t i = 0; sorted != NULL && i + 1 < n; ++i) CHECK(sorted[i].step < sorted[i + 1].step);
    free(sorted);
    /* a write past the row is refused, not made */
    uint8_t big[9] = {0};
    CHECK(!mt_replay_put(&w, 7, 0, big, sizeof big));
    CHECK(!mt_replay_put(&w, 7, 8, big, 1));
    mt_replay_free(&w);
    CHECK(w.data == NULL && w.rows == 0);

    mt_replay_init(&w, 47, 8);
    CHECK(w.rows == 2);
    mt_replay_free(&w);
    /* a step larger than the bound: not kept at all */
    mt_replay_init(&w, 15, 8);
    CHECK(w.rows == 0);
    CHECK(!put(&w, 0));
    CHECK(!holds(&w, 0) && w.dropped == 1);
    mt_replay_entry *none = NULL;
    CHECK(mt_replay_sorted(&w, &none) == 0 && none == NULL);
    mt_replay_free(&w);
    /* no window */
    mt_replay_init(&w, 0, 8);
    CHECK(!put(&w, 0) && w.dropped == 0);
    mt_replay_free(&w);
}

/* A HELD of receiver `rank` of `world` about simulation 7, request 9, into f. */
static size_t held_frame(uint8_t *f, int status, uint32_t rank, uint32_t world, uint64_t bits,
                         const uint8_t *map) {
    mt_put_prefix(f, 10, 0, 7);
    mt_put_u64(f + 16, 9);
    mt_put_u32(f + 24, rank);
    mt_put_u32(f + 28, world);
    f[32] = (uint8_t)status, f[33] = 0, f[34] = 0, f[35] = 0;
    mt_put_u64(f + 36, bits);
    size_t bytes = (size_t)((bits + 7) / 8);
    if (bytes) memcpy(f + 44, map, bytes);
    return 44 + bytes;
}

static void test_held_parse(void) {
    uint8_t f[128];
    const uint8_t map[2] = {0x05, 0x01}; /* bits 0, 2, 8 */
    mt_held h;
    size_t n = held_frame(f, MT_HELD_STEPS, 1, 2, 9, map);
    CHECK(n == 46);
    CHECK(mt_held_parse(f, n, 7, 9, 1, 2, &h) == NULL);
    /* bit i is step i * world + rank: 1, 5, 17 held; others (and receiver 0's) not */
    CHECK(mt_held_holds(&h, 1, 7, false) && mt_held_holds(&h, 5, 7, false) &&
          mt_held_holds(&h, 17, 7, false));
    CHECK(!mt_held_holds(&h, 3, 7, false) && !mt_held_holds(&h, 0, 7, false) &&
          !mt_held_holds(&h, 4, 7, false));
    CHECK(!mt_held_holds(&h, 19, 7, false)); /* (past the bits) */
    /* routed (7 + t) % 2: receiver 1 gets the even steps, bit i is step 2i: 0, 4, 16 */
    CHECK(mt_held_holds(&h, 0, 7, true) && mt_held_holds(&h, 4, 7, true) &&
          mt_held_holds(&h, 16, 7, true));
    CHECK(!mt_held_holds(&h, 1, 7, true) && !mt_held_holds(&h, 2, 7, true) &&
          !mt_held_holds(&h, 18, 7, true));
    mt_held_free(&h);
    /* finished: every step; none: none */
    n = held_frame(f, MT_HELD_FINISHED, 0, 1, 0, NULL);
    CHECK(mt_held_parse(f, n, 7, 9, 0, 1, &h) == NULL && mt_held_holds(&h, 123, 7, false));
    mt_held_free(&h);
    n = held_frame(f, MT_HELD_NONE, 0, 1, 0, NULL);
    CHECK(mt_held_parse(f, n, 7, 9, 0, 1, &h) == NULL && !mt_held_holds(&h, 0, 7, false));
    mt_held_free(&h);
    /* rejected: each field read, and the exact length */
    n = held_frame(f, MT_HELD_STEPS, 1, 2, 9, map);
    CHECK(strcmp(mt_held_parse(f, n - 1, 7, 9, 1, 2, &h), "bad_size") == 0);
    CHECK(strcmp(mt_held_parse(f, n + 1, 7, 9, 1, 2, &h), "bad_size") == 0);
    CHECK(strcmp(mt_held_parse(f, 40, 7, 9, 1, 2, &h), "truncated") == 0);
    CHECK(strcmp(mt_held_parse(f, n, 8, 9, 1, 2, &h), "bad_request_id") == 0);
    CHECK(strcmp(mt_held_parse(f, n, 7, 10, 1, 2, &h), "bad_request_id") == 0);
    CHECK(strcmp(mt_held_parse(f, n, 7, 9, 0, 2, &h), "bad_rank") == 0);
    CHECK(strcmp(mt_held_parse(f, n, 7, 9, 1, 3, &h), "bad_rank") == 0);
    f[33] = 1;
    CHECK(strcmp(mt_held_parse(f, n, 7, 9, 1, 2, &h), "bad_request") == 0);
    f[33] = 0, f[32] = 4;
    CHECK(strcmp(mt_held_parse(f, n, 7, 9, 1, 2, &h), "bad_request") == 0);
    f[32] = MT_HELD_STEPS, f[5] = 12;
    CHECK(strcmp(mt_held_parse(f, n, 7, 9, 1, 2, &h), "bad_kind") == 0);
    f[5] = 10, f[0] = 'X';
    CHECK(strcmp(mt_held_parse(f, n, 7, 9, 1, 2, &h), "bad_magic") == 0);
    n = held_frame(f, MT_HELD_FINISHED, 0, 1, 8, map); /* (bits only with status 1) */
    CHECK(strcmp(mt_held_parse(f, n, 7, 9, 0, 1, &h), "bad_size") == 0);
    n = held_frame(f, MT_HELD_STEPS, 2, 2, 0, NULL); /* (rank < world) */
    CHECK(strcmp(mt_held_parse(f, n, 7, 9, 2, 2, &h), "bad_rank") == 0);
    uint8_t q[24];
    mt_held_query(q, 7, 9);
    CHECK(memcmp(q, "MTRN", 4) == 0 && q[5] == 9 && mt_get_u64(q + 8) == 7 &&
          mt_get_u64(q + 16) == 9);
}

/* The bound from the environment: external mode (a rendezvous) only, unless set. */
static void test_replay_bytes(void) {
    mt_client *c = NULL;
    CHECK(mt_client_create(&c) == MT_OK);
    unsetenv("MELISSA_TRAINER_ATTEMPT");
    unsetenv("MELISSA_TRAINER_REPLAY_BYTES");
    CHECK(mt_follow_setup(c) == MT_OK && c->replay.max_bytes == 0); /* (no rendezvous) */
    c->rendezvous_used = strdup("/nonexistent");
    CHECK(mt_follow_setup(c) == MT_OK && c->replay.max_bytes == (uint64_t)64 << 20);
    setenv("MELISSA_TRAINER_ATTEMPT", "2", 1); /* launched: the launcher runs it again */
    CHECK(mt_follow_setup(c) == MT_OK && c->replay.max_bytes == 0);
    setenv("MELISSA_TRAINER_REPLAY_BYTES", " 4096 ", 1); /* (the variable wins, as Python) */
    CHECK(mt_follow_setup(c) == MT_OK && c->replay.max_bytes == 4096);
    unsetenv("MELISSA_TRAINER_ATTEMPT");
    setenv("MELISSA_TRAINER_REPLAY_BYTES", "-1", 1);
    CHECK(mt_follow_setup(c) == MT_EENV);
    CHECK(strstr(mt_client_error(c), "MELISSA_TRAINER_REPLAY_BYTES='-1' is not a number") != NULL);
    setenv("MELISSA_TRAINER_REPLAY_BYTES", "12k", 1);
    CHECK(mt_follow_setup(c) == MT_EENV);
    unsetenv("MELISSA_TRAINER_REPLAY_BYTES");
    CHECK(mt_set_replay_bytes(c, 0) == MT_OK); /* (set: no window) */
    CHECK(mt_follow_setup(c) == MT_OK && c->replay.max_bytes == 0);
    mt_client_abort(c);
}

/* MELISSA_TRAINER_ATTEMPT read as Python's int() (spaces around, a sign); not a number:
 * -1 (nothing asked). A first attempt, or none with a rendezvous, asks nothing. */
static void test_rerun_attempt(void) {
    const char *cases[][2] = {{" 1 ", "1"}, {"+2", "2"}, {"0", "0"}, {"", "-1"},
                              {"  ", "-1"}, {"x", "-1"}, {"1x", "-1"}, {"-", "-1"}};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; ++k) {
        setenv("MELISSA_TRAINER_ATTEMPT", cases[k][0], 1);
        CHECK(mt_rerun_attempt() == atol(cases[k][1]));
    }
    unsetenv("MELISSA_TRAINER_ATTEMPT");
    CHECK(mt_rerun_attempt() == -1);
    mt_client *c = NULL;
    CHECK(mt_client_create(&c) == MT_OK);
    setenv("MELISSA_TRAINER_ATTEMPT", "1", 1);
    mt_rerun_ask(c); /* (no rendezvous: endpoints given) */
    CHECK(c->rerun_asked && c->rerun_held == NULL && !mt_rerun_skips(c, 0, 0.0));
    c->rendezvous_used = strdup("/nonexistent");
    setenv("MELISSA_TRAINER_ATTEMPT", "0", 1); /* (a first attempt: the rendezvous unread) */
    mt_rerun_ask(c);
    CHECK(c->rerun_held == NULL);
    setenv("MELISSA_TRAINER_ATTEMPT", "1", 1); /* (no rendezvous there: said on stderr) */
    mt_rerun_ask(c);
    CHECK(c->rerun_held == NULL && mt_client_error(c)[0] == '\0');
    unsetenv("MELISSA_TRAINER_ATTEMPT");
    mt_client_abort(c);
}

int main(void) {
    test_window();
    test_held_parse();
    test_replay_bytes();
    test_rerun_attempt();
    return unit_report("all follow unit tests passed");
}
