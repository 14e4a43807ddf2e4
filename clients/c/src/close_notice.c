/* close_notice.c: what a closing C client says, once, while it waits on a receiver
 * (melissa_trainer/client/patience.py notice_after, gave_up.py waits_for and receipts.py
 * Rounds._tell, whose rules and words these are, with the C setters named): the
 * receipt phase's "closing, its BYE is not confirmed yet" (receipt.c), said when a
 * receiver has neither answered nor been connected for mt_notice_after seconds, before
 * the close gives up on it. Before, the C receipt phase said nothing for its whole wait.
 *
 * The Python words become the C ones by the setters alone (tests/c/
 * test_c_close_receipt_notice.py translates and compares): "ClientTuning.NAME=V s" is
 * "mt_set_NAME=V s", "ClientTuning(A=..., B=...) shortens it" is "mt_set_A and mt_set_B
 * shorten it", a bound of None is a setting < 0. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"
#include "close_wait.h"

#define NOTICE_AFTER 5.0 /* s: patience.py NOTICE_AFTER */

double mt_notice_after(double disconnected_timeout) {
    if (disconnected_timeout < 0 || disconnected_timeout / 2 >= NOTICE_AFTER) return NOTICE_AFTER;
    return disconnected_timeout / 2;
}

void mt_waits_for(mt_buf *b, double left, const char *bound, const char *what,
                  const char *rendezvous, bool follows, double follow, double elapsed,
                  bool resumed) {
    mt_waits_for_action(b, "close", left, bound, what, rendezvous, follows, follow, elapsed,
                        resumed);
}

void mt_waits_for_action(mt_buf *b, const char *action, double left, const char *bound,
                         const char *what, const char *rendezvous, bool follows, double follow,
                         double elapsed, bool resumed) {
    char setting[64] = "", ft[32];
    const char *who = resumed ? "the trainer to be resumed (--resume_from_checkpoint latest) and"
                              : "a restarted trainer to";
    if (bound != NULL && bound[0] != '\0')
        snprintf(setting, sizeof setting, "%.*s", (int)strcspn(bound, "="), bound);
    if (left < 0) {
        mt_buf_printf(b, "The %s waits for it to %s, with no bound (mt_set_%s_timeout "
                         "and mt_set_disconnected_timeout are < 0)", action, what, action);
        if (follows)
            mt_buf_printf(b, ", and follows a restarted trainer as soon as one publishes in %s",
                          rendezvous);
    } else {
        mt_buf_printf(b, "The %s waits up to %.0f s more for it to %s (%s)", action, left, what,
                      bound);
    }
    bool also = follows && left >= 0; /* (follow_timeout shortens it too) */
    if (also && follow < 0) {
        mt_buf_printf(b, ", then for %s publish in %s, with no bound "
                         "(mt_set_follow_timeout < 0), and follows it (at once if it "
                         "publishes sooner)", who, rendezvous);
    } else if (also) {
        mt_format_double(follow, ft);
        mt_buf_printf(b, ", then up to %.0f s (mt_set_follow_timeout=%s s) for %s publish "
                         "in %s, and follows it (at once if it publishes sooner): up to %.0f "
                         "s more, %.0f s in all",
                      follow, ft, who, rendezvous, left + follow, elapsed + left + follow);
    }
    mt_buf_printf(b, "%s", ". ");
    if (setting[0] != '\0' && also)
        mt_buf_printf(b, "%s and mt_set_follow_timeout shorten it; ", setting);
    else if (setting[0] != '\0')
        mt_buf_printf(b, "%s shortens it; ", setting);
    else if (also)
        mt_buf_printf(b, "%s", "mt_set_follow_timeout shortens it; ");
    mt_buf_printf(b, "nothing more is said until the %s ends.", action);
}

void mt_receipt_notice_text(mt_buf *b, const mt_client *c, const char *whose, size_t rank,
                            const char *follow_endpoint, const char *clock, double quiet,
                            double deadline_left, bool capped, double elapsed) {
    double left = -1;
    char bound[160] = "", t[32];
    if (c->disconnected_timeout >= 0) {
        left = c->disconnected_timeout - quiet;
        mt_format_double(c->disconnected_timeout, t);
        snprintf(bound, sizeof bound, "mt_set_disconnected_timeout=%s s", t);
    }
    if (isfinite(deadline_left) && (bound[0] == '\0' || deadline_left < left)) {
        left = deadline_left;
        mt_format_double(c->close_timeout, t);
        if (capped) /* (the cap, not a close timeout past a progress, ends it: close_cap.c) */
            mt_close_cap_bound(bound, sizeof bound, "mt_set_close_timeout", c->close_timeout);
        else
            snprintf(bound, sizeof bound, "mt_set_close_timeout=%s s", t);
    }
    if (bound[0] != '\0' && left < 0) left = 0;
    mt_buf_printf(b, "%s: closing, its BYE is not confirmed yet: the trainer's receiver %zu "
                     "(%s) has neither answered nor been connected since %s (%.0f s: the "
                     "trainer died or stopped, or its node). ",
                  whose, rank, follow_endpoint, clock, quiet);
    /* (followed once gone only with a replay window, and said only with a bound to its
     * wait, as confirm.py's follow_wait) */
    bool follows = c->replay.max_bytes > 0 && c->rendezvous_used != NULL &&
                   c->follow_timeout >= 0;
    mt_waits_for(b, bound[0] == '\0' ? -1 : left, bound, "answer",
                 c->rendezvous_used != NULL ? c->rendezvous_used : "", follows,
                 c->follow_timeout, elapsed, false); /* (receipts.py: never "resumed") */
}

void mt_receipt_notice(const mt_client *c, const char *whose, size_t rank,
                       const char *follow_endpoint, double since, double deadline, bool capped,
                       double began) {
    double now = mt_now();
    char clock[16];
    time_t wall = time(NULL) - (time_t)(now - since);
    struct tm tm;
    if (localtime_r(&wall, &tm) == NULL || strftime(clock, sizeof clock, "%H:%M:%S", &tm) == 0)
        snprintf(clock, sizeof clock, "?");
    mt_buf b = {0};
    mt_receipt_notice_text(&b, c, whose, rank, follow_endpoint, clock, now - since,
                           deadline - now, capped, now - began);
    if (!b.oom) fprintf(stderr, "melissa_trainer: mt_client_close: %s\n", b.data);
    free(b.data);
}
