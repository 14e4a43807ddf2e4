/* unit_describes.c: mt_admission_describes (admission_watch.c), the C twin of
 * melissa_trainer/client/admission_watch.py describes: which receiver's refusals a client
 * trusts at a send (one its own HELLO would get) and which it leaves to its close (an
 * earlier attempt's declaration, a reason of another kind or cut short). The reasons are
 * stream/schema.py's words, as tests/client/test_admission_watch.py builds them. Exits
 * non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>

#include "internal.h"
#include "unit_check.h"

#define HEAD "HELLO declares other fields than the study's: "

int main(void) {
    mt_client *c = NULL;
    CHECK(mt_client_create(&c) == MT_OK);
    uint64_t five[] = {5}, grid[] = {2, 3};
    CHECK(mt_declare_field(c, "u", MT_FLOAT32, 1, five) == MT_OK);
    CHECK(mt_declare_field(c, "it's", MT_FLOAT64, 2, grid) == MT_OK);
    /* no parameters declared */
    CHECK(mt_admission_describes(c, "HELLO carries no parameters, the study's are ['a']"));
    CHECK(!mt_admission_describes(c, "HELLO carries parameters ['a'], the study's are []"));
    /* fields: each part holds for these */
    CHECK(mt_admission_describes(c, HEAD "field 'u' is float32 (5,) where the study's is "
                                         "float32 (4,)"));
    CHECK(mt_admission_describes(c, HEAD "field \"it's\" is float64 (2, 3) where the study's "
                                         "is float64 (3, 2)"));
    CHECK(mt_admission_describes(c, HEAD "field 'u' is not one of the study's; field 'v' is "
                                         "missing"));
    CHECK(mt_admission_describes(c, HEAD "fields in the order ['u', \"it's\"], the study's "
                                         "are [\"it's\", 'u']"));
    /* an earlier attempt's declaration: another shape, another dtype, fields it lacked */
    CHECK(!mt_admission_describes(c, HEAD "field 'u' is float32 (4,) where the study's is "
                                          "float32 (5,)"));
    CHECK(!mt_admission_describes(c, HEAD "field 'u' is float64 (5,) where the study's is "
                                          "float32 (5,)"));
    CHECK(!mt_admission_describes(c, HEAD "field 'v' is not one of the study's"));
    CHECK(!mt_admission_describes(c, HEAD "field 'u' is missing"));
    CHECK(!mt_admission_describes(c, HEAD "fields in the order ['v', 'u'], the study's are "
                                          "['u', 'v']"));
    CHECK(!mt_admission_describes(c, HEAD "field 'u' is not one of the study's; field 'w' is "
                                          "float32 (5,) where the study's is float32 (4,)"));
    /* another kind, another run, cut short */
    CHECK(!mt_admission_describes(c, "HELLO of run b, this receiver serves run a (wrong_run)"));
    CHECK(!mt_admission_describes(c, "HELLO declares other"));
    CHECK(!mt_admission_describes(c, ""));
    /* parameters: sorted, as Python's sorted() */
    CHECK(mt_set_parameter(c, "nu", 0.1) == MT_OK);
    CHECK(mt_set_parameter(c, "alpha", 2.0) == MT_OK);
    CHECK(mt_admission_describes(c, "HELLO carries parameters ['alpha', 'nu'], the study's "
                                    "are ['alpha', 'beta']"));
    CHECK(!mt_admission_describes(c, "HELLO carries parameters ['nu'], the study's are ['a']"));
    CHECK(!mt_admission_describes(c, "HELLO carries no parameters, the study's are ['a']"));
    mt_client_abort(c);
    return unit_report(NULL);
}
