/* fail.c: the public ends of a client that delivers what it sent: mt_client_close (the
 * run finished: BYE) and mt_client_fail (the run failed: no BYE), both mt_close_as
 * (close.c). mt_client_fail is the Python client's close(bye=False), which leaving
 * its `with` block by an exception calls (melissa_trainer/client/client_close.py
 * __exit__): the batches held are sent and what is queued is delivered, within
 * failed_close_timeout in all, to the receivers connected, and no BYE is said, so the
 * trainer trains on the samples it received and does not count the simulation finished
 * (docs/protocol.md, "A client that fails ... sends no BYE"). Before it, a failing C
 * solver had only mt_client_abort, linger 0, which drops what the client still batched
 * (tests/c/test_c_fail_delivers.py). mt_client_abort stays the immediate end. Not
 * thread-safe: the closing thread. */
#include <stdio.h>

#include "internal.h"
#include "close_wait.h"

mt_status mt_client_close(mt_client *c) { return mt_close_as(c, false, NULL, 0); }

mt_status mt_client_close_message(mt_client *c, char *message, size_t size) {
    return mt_close_as(c, false, message, size);
}

mt_status mt_client_fail_message(mt_client *c, const char *reason, char *message, size_t size) {
    if (c != NULL && reason != NULL && reason[0] != '\0') { /* (its log's last lines: why) */
        if (c->started)
            fprintf(stderr, "melissa_trainer: mt_client_fail: simulation %llu rank %d failed: "
                            "%s; no BYE sent (the run did not finish)\n",
                    (unsigned long long)c->simulation_id, c->rank, reason);
        else
            fprintf(stderr, "melissa_trainer: mt_client_fail: failed before mt_client_start: "
                            "%s\n", reason);
        fflush(stderr);
    }
    return mt_close_as(c, true, message, size);
}

mt_status mt_client_fail(mt_client *c, const char *reason) {
    return mt_client_fail_message(c, reason, NULL, 0);
}
