/* unit_follow_dial.c: the C unit test (CTest) of the bound on a control DEALER's TCP
 * connect (admission.c mt_follow_dial: the follow socket's ADMISSION, HELD and RECEIPT
 * questions): ZMQ_CONNECT_TIMEOUT is mt_connect_timeout_ms of the disconnected timeout,
 * as a data socket's (lifecycle.c) and the Python client's control_dealer
 * (tests/client/test_connect_timeout.py). Before, 0: a host that never answers held the
 * connect for the kernel's ~2 minutes. Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <zmq.h>

#include "internal.h"
#include "unit_check.h"

static int bound_of(void *ctx, double disconnected_timeout) {
    void *s = mt_follow_dial(ctx, "tcp://127.0.0.1:1", NULL, NULL, NULL, disconnected_timeout);
    int ms = -2;
    size_t size = sizeof ms;
    if (s == NULL || zmq_getsockopt(s, ZMQ_CONNECT_TIMEOUT, &ms, &size) != 0) ms = -3;
    if (s != NULL) zmq_close(s);
    return ms;
}

int main(void) {
    void *ctx = zmq_ctx_new();
    CHECK(ctx != NULL);
    if (ctx == NULL) return unit_report(NULL);
    CHECK(bound_of(ctx, 7.5) == 7500);
    CHECK(bound_of(ctx, 0.5) == 2000); /* (the floor: a dropped SYN is retried after 1 s) */
    CHECK(bound_of(ctx, -1) == 0);     /* (no disconnected timeout: the kernel's) */
    zmq_ctx_term(ctx);
    return unit_report("unit_follow_dial: ok");
}
