/* unit_close_notice.c: the C unit test (CTest) of the receipt phase's notice
 * (close_notice.c mt_receipt_notice_text): the Python client's words (receipts.py
 * Rounds._tell, gave_up.py waits_for) with the C setters named;
 * tests/client/test_receipt_notice_words.py pins the same texts, from the Python ones
 * translated. Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "close_wait.h"
#include "unit_check.h"

#define HEAD                                                                                 \
    "simulation 5 rank 0: closing, its BYE is not confirmed yet: the trainer's receiver 0 " \
    "(tcp://127.0.0.1:2) has neither answered nor been connected since 12:00:00 (1 s: the " \
    "trainer died or stopped, or its node). "

static void same(const mt_client *c, double deadline_left, bool capped, const char *want) {
    mt_buf b = {0};
    mt_receipt_notice_text(&b, c, "simulation 5 rank 0", 0, "tcp://127.0.0.1:2", "12:00:00",
                           1.0, deadline_left, capped, 1.25);
    CHECK(!b.oom && strcmp(b.data, want) == 0);
    if (b.oom || strcmp(b.data, want) != 0) fprintf(stderr, "got:  %s\nwant: %s\n", b.data, want);
    free(b.data);
}

/* mt_waits_for alone (close_wait.c's notice), `resumed` or not */
static void waits(double left, double follow, bool resumed, const char *want) {
    mt_buf b = {0};
    mt_waits_for(&b, left, "mt_set_disconnected_timeout=2.0 s", "reconnect", "/rv", true,
                 follow, 3.0, resumed);
    CHECK(!b.oom && strcmp(b.data, want) == 0);
    if (b.oom || strcmp(b.data, want) != 0) fprintf(stderr, "got:  %s\nwant: %s\n", b.data, want);
    free(b.data);
}

int main(void) {
    mt_client *c = calloc(1, sizeof *c);
    CHECK(c != NULL);
    if (c == NULL) return unit_report(NULL);
    char rendezvous[] = "/rv";
    c->rendezvous_used = rendezvous;
    c->replay.max_bytes = 1 << 20; /* (a replay window: a restarted trainer is followed) */
    /* the disconnected timeout first, then the follow timeout */
    c->disconnected_timeout = 2.0, c->close_timeout = 600.0, c->follow_timeout = 1.0;
    same(c, 590.0, false,
         HEAD "The close waits up to 1 s more for it to answer (mt_set_disconnected_timeout=2.0 "
              "s), then up to 1 s (mt_set_follow_timeout=1.0 s) for a restarted trainer to "
              "publish in /rv, and follows it (at once if it publishes sooner): up to 2 s more, "
              "3 s in all. mt_set_disconnected_timeout and mt_set_follow_timeout shorten it; "
              "nothing more is said until the close ends.");
    /* the close's cap ends it, no window */
    c->replay.max_bytes = 0;
    c->disconnected_timeout = 600.0, c->close_timeout = 2.0;
    same(c, 12.0, true,
         HEAD "The close waits up to 12 s more for it to answer (mt_set_close_timeout=2.0 s, 10 "
              "times it in all: the close's cap). mt_set_close_timeout shortens it; nothing "
              "more is said until the close ends.");
    same(c, 12.0, false,
         HEAD "The close waits up to 12 s more for it to answer (mt_set_close_timeout=2.0 s). "
              "mt_set_close_timeout shortens it; nothing more is said until the close ends.");
    /* no bound at all */
    c->disconnected_timeout = -1, c->close_timeout = -1, c->follow_timeout = -1;
    same(c, INFINITY, false,
         HEAD "The close waits for it to answer, with no bound (mt_set_close_timeout and "
              "mt_set_disconnected_timeout are < 0). nothing more is said until the close ends.");
    /* a trainer preempted (its stop record): its resume waited for, as gave_up.py
     * waits_for(resumed=True) says it (tests/client/test_waits_for_resumed_words.py) */
    waits(2.0, 4.0, true,
          "The close waits up to 2 s more for it to reconnect (mt_set_disconnected_timeout=2.0 "
          "s), then up to 4 s (mt_set_follow_timeout=4.0 s) for the trainer to be resumed "
          "(--resume_from_checkpoint latest) and publish in /rv, and follows it (at once if it "
          "publishes sooner): up to 6 s more, 9 s in all. mt_set_disconnected_timeout and "
          "mt_set_follow_timeout shorten it; nothing more is said until the close ends.");
    waits(2.0, -1, true,
          "The close waits up to 2 s more for it to reconnect (mt_set_disconnected_timeout=2.0 "
          "s), then for the trainer to be resumed (--resume_from_checkpoint latest) and "
          "publish in /rv, with no bound (mt_set_follow_timeout < 0), and follows it (at once "
          "if it publishes sooner). mt_set_disconnected_timeout and mt_set_follow_timeout "
          "shorten it; nothing more is said until the close ends.");
    waits(2.0, 4.0, false,
          "The close waits up to 2 s more for it to reconnect (mt_set_disconnected_timeout=2.0 "
          "s), then up to 4 s (mt_set_follow_timeout=4.0 s) for a restarted trainer to publish "
          "in /rv, and follows it (at once if it publishes sooner): up to 6 s more, 9 s in "
          "all. mt_set_disconnected_timeout and mt_set_follow_timeout shorten it; nothing more "
          "is said until the close ends.");
    /* when: 5 s, or half the disconnected timeout if shorter (patience.py notice_after) */
    CHECK(mt_notice_after(-1) == 5.0 && mt_notice_after(2.0) == 1.0 &&
          mt_notice_after(60.0) == 5.0);
    free(c);
    return unit_report("unit_close_notice: ok");
}
