/* unit.c: the C unit tests (CTest): formatting, JSON, UTF-8, the step set, the check
 * behind the FINITE flag, the state rules, and the parsing of an ADMISSION reply (what is
 * rejected, what is tolerated) and of a RECEIPT. The send path's are in unit_send.c.
 * Exits non-zero on failure. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "unit_check.h"

static void test_format_double(void) {
    static const struct {
        double v;
        const char *repr;
    } cases[] = {
        {300.0, "300.0"}, {0.1, "0.1"}, {1e-05, "1e-05"}, {0.0001, "0.0001"},
        {1e16, "1e+16"}, {1e15, "1000000000000000.0"}, {-2.5e-300, "-2.5e-300"},
        {3.141592653589793, "3.141592653589793"}, {0.0, "0.0"}, {-0.0, "-0.0"},
        {123456789.125, "123456789.125"}, {1.7976931348623157e308, "1.7976931348623157e+308"},
        {5e-324, "5e-324"}, {2.5, "2.5"}, {1e22, "1e+22"},
        {12345678901234567.0, "1.2345678901234568e+16"},
        {5.9604644775390625e-08, "5.960464477539063e-08"}, /* 2^-24: a lopsided interval */
        {9007199254740992.0, "9007199254740992.0"}, {0.3, "0.3"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; ++i) {
        char out[32];
        mt_format_double(cases[i].v, out);
        if (strcmp(out, cases[i].repr) != 0) {
            fprintf(stderr, "format %.17g: got %s, want %s\n", cases[i].v, out, cases[i].repr);
            ++failures;
        }
    }
}

static void test_json(void) {
    mt_json_member *m;
    size_t n;
    char err[128];
    CHECK(mt_json_object(" {\"b\": 1.5, \"a\": -2, \"s\": \"x\\u00e9\\ud83d\\ude00\", "
                         "\"o\": [1, {\"k\": null}]} ", &m, &n, err, sizeof err));
    CHECK(n == 4);
    if (n == 4) {
        CHECK(strcmp(m[0].key, "b") == 0 && m[0].kind == MT_JSON_NUMBER && m[0].number == 1.5);
        CHECK(m[1].integer && m[1].number == -2);
        CHECK(m[2].kind == MT_JSON_STRING && strcmp(m[2].string, "x\xc3\xa9\xf0\x9f\x98\x80") == 0);
        CHECK(m[3].kind == MT_JSON_OTHER && strcmp(m[3].string, "[1, {\"k\": null}]") == 0);
    }
    mt_json_free(m, n);
    const char *bad[] = {"", "{", "{\"a\" 1}", "{\"a\": 01}", "{\"a\": 1,}", "{\"a\": 1} x",
                         "{a: 1}", "{\"a\": \"\x01\"}", "[1]", "{\"a\": 1.}", "{\"a\": tru}"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        bool ok = mt_json_object(bad[i], &m, &n, err, sizeof err);
        if (ok) {
            fprintf(stderr, "json accepted %s\n", bad[i]);
            ++failures;
            mt_json_free(m, n);
        }
    }
    CHECK(mt_json_valid("[1, 2]") && !mt_json_valid("[1, 2"));
    /* a number last in the text, its fraction or exponent cut (read up to the NUL, not
     * past it: ASan), and Python's words and position in characters for the failures */
    CHECK(mt_json_valid("1") && mt_json_valid("-1.5e+3") && !mt_json_valid("1e") &&
          !mt_json_valid("1e+") && !mt_json_valid("1.") && !mt_json_valid("-"));
    CHECK(!mt_json_object("{\"\xc3\xa9\": 1.}", &m, &n, err, sizeof err) &&
          strcmp(err, "Expecting ',' delimiter at character 7") == 0);
    /* a trailing comma in Python 3.13's words, at the comma, on every reader (3.10-3.12:
     * "Expecting property name ..." or "Expecting value" at the bracket) */
    CHECK(!mt_json_object("{\"a\": 1, }", &m, &n, err, sizeof err) &&
          strcmp(err, "Illegal trailing comma before end of object at character 7") == 0);
    CHECK(!mt_json_object("{\"a\": [1 ,\n ]}", &m, &n, err, sizeof err) &&
          strcmp(err, "Illegal trailing comma before end of array at character 9") == 0);
    CHECK(!mt_json_check("[{\"k\": {\"j\": 2,}}]", err, sizeof err) &&
          strcmp(err, "Illegal trailing comma before end of object at character 14") == 0);
    CHECK(!mt_json_object("{\"a\": [1,}", &m, &n, err, sizeof err) &&
          strcmp(err, "Expecting value at character 9") == 0);
    CHECK(!mt_json_object("{,}", &m, &n, err, sizeof err) &&
          strcmp(err, "Expecting property name enclosed in double quotes at character 1") == 0);
    /* a lone surrogate's escape, where it is written (a pair, an escaped backslash: none) */
    CHECK(!mt_json_no_lone_surrogate("{\"\xc3\xa9\": \"x\\uDC00\"}", err, sizeof err) &&
          strcmp(err, "\\uDC00 at character 8") == 0);
    CHECK(!mt_json_no_lone_surrogate("{\"\\ud800\\ud800\": 1}", err, sizeof err) &&
          strcmp(err, "\\ud800 at character 2") == 0);
    CHECK(mt_json_no_lone_surrogate("{\"\\ud83d\\ude00\\\\ud800\": 1}", err, sizeof err));
}

static void test_json_array(void) {
    char **items;
    size_t n;
    char err[128];
    CHECK(mt_json_array(" [ {\"name\": \"u\", \"shape\": [4, 2]}, 7 , \"s\"] ", &items, &n, err,
                        sizeof err));
    CHECK(n == 3);
    if (n == 3) {
        CHECK(strcmp(items[0], "{\"name\": \"u\", \"shape\": [4, 2]}") == 0);
        CHECK(strcmp(items[1], "7") == 0 && strcmp(items[2], "\"s\"") == 0);
    }
    mt_json_array_free(items, n);
    CHECK(mt_json_array("[]", &items, &n, err, sizeof err) && n == 0);
    mt_json_array_free(items, n);
    const char *bad[] = {"", "[", "[1,]", "[1] x", "{}", "[1 2]"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
        CHECK(!mt_json_array(bad[i], &items, &n, err, sizeof err));
        CHECK(items == NULL && n == 0);
    }
}

static void test_utf8_and_escape(void) {
    CHECK(mt_utf8_valid("caf\xc3\xa9", 5));
    CHECK(!mt_utf8_valid("\xc3", 1));
    CHECK(!mt_utf8_valid("\xed\xa0\x80", 3)); /* a surrogate */
    CHECK(!mt_utf8_valid("\xc0\xaf", 2));     /* overlong */
    mt_buf b = {0};
    mt_buf_json_string(&b, "a\"\\\n\x01\x7f\xc3\xa9\xf0\x9f\x98\x80", 12);
    mt_buf_put(&b, "", 1);
    CHECK(!b.oom && strcmp(b.data, "\"a\\\"\\\\\\n\\u0001\\u007f\\u00e9\\ud83d\\ude00\"") == 0);
    free(b.data);
}

static void test_stepset(void) {
    mt_stepset s = {0};
    int added = 0;
    for (uint64_t i = 0; i < 1000; ++i) added += mt_stepset_add(&s, i * 7919u % 500u);
    CHECK(added == 500 && s.run_count + s.count == 500);
    CHECK(mt_stepset_add(&s, UINT64_MAX) == 1 && mt_stepset_add(&s, UINT64_MAX) == 0);
    mt_stepset_free(&s);
    /* regular numbering is one run: no memory, whatever the number of steps */
    for (uint64_t i = 0; i < 100000; ++i) CHECK(mt_stepset_add(&s, 10 * i) == 1);
    CHECK(s.run_count == 100000 && s.count == 0 && s.cap == 0);
    CHECK(mt_stepset_add(&s, 500) == 0 && mt_stepset_add(&s, 505) == 1 && s.count == 1);
    /* the least and greatest a receiver gets (stop_record.c): of 3 receivers by t % 3,
     * receiver 1 gets 10, 40, ..., 999970 (and 505), receiver 2 gets 20 .. 999980; routed
     * (s + t) % 3 with s = 4, receiver 2 gets those t % 3 == 1 */
    uint64_t lo = 0, hi = 0;
    CHECK(mt_stepset_span(&s, 3, 0, 1, false, &lo, &hi) && lo == 0 && hi == 999990);
    CHECK(mt_stepset_span(&s, 3, 1, 3, false, &lo, &hi) && lo == 10 && hi == 999970);
    CHECK(mt_stepset_span(&s, 3, 2, 3, false, &lo, &hi) && lo == 20 && hi == 999980);
    CHECK(mt_stepset_span(&s, 4, 2, 3, true, &lo, &hi) && lo == 10 && hi == 999970);
    mt_stepset_free(&s);
    CHECK(!mt_stepset_span(&s, 3, 0, 1, false, &lo, &hi)); /* (none) */
    /* off-run steps, then the run growing into them: each step counted once */
    uint64_t order[] = {0, 1, 2, 5, 4, 3, 6, 7, 7, 2, 9, 8};
    added = 0;
    for (size_t i = 0; i < sizeof order / sizeof *order; ++i) added += mt_stepset_add(&s, order[i]);
    CHECK(added == 10 && s.run_count + s.count == 10);
    mt_stepset_free(&s);
}

static void test_all_finite(void) {
    /* float32 and float64: every IEEE class; a non-finite value anywhere, misaligned */
    float f[4] = {0.0f, -0.0f, 3.4028235e38f, 1e-45f};
    CHECK(mt_all_finite(MT_FLOAT32, f, 4));
    f[2] = INFINITY;
    CHECK(!mt_all_finite(MT_FLOAT32, f, 4));
    f[2] = -INFINITY;
    CHECK(!mt_all_finite(MT_FLOAT32, f, 4));
    f[2] = NAN;
    CHECK(!mt_all_finite(MT_FLOAT32, f, 4));
    CHECK(mt_all_finite(MT_FLOAT32, f, 2)); /* only the values given */
    double d[3] = {1.7976931348623157e308, -5e-324, 0.0};
    CHECK(mt_all_finite(MT_FLOAT64, d, 3));
    d[2] = -NAN;
    CHECK(!mt_all_finite(MT_FLOAT64, d, 3));
    unsigned char raw[1 + 2 * sizeof(double)];
    d[0] = 1.0, d[1] = INFINITY;
    memcpy(raw + 1, d, 2 * sizeof(double));
    CHECK(!mt_all_finite(MT_FLOAT64, raw + 1, 2));
    /* float16 by its bits: 0x7bff is 65504 (the largest finite), 0x7c00 Inf, 0xfe00 NaN */
    uint16_t h[3] = {0x7bff, 0x0001, 0x8000};
    CHECK(mt_all_finite(MT_FLOAT16, h, 3));
    h[1] = 0x7c00;
    CHECK(!mt_all_finite(MT_FLOAT16, h, 3));
    h[1] = 0xfe00;
    CHECK(!mt_all_finite(MT_FLOAT16, h, 3));
    /* integer fields never carry FINITE, whatever their bits */
    int32_t i[2] = {0x7f800000, 1};
    CHECK(!mt_all_finite(MT_INT32, i, 2));
}

static void test_state_rules(void) {
    mt_client *c;
    CHECK(mt_client_create(&c) == MT_OK);
    uint64_t shape[2] = {2, 3}, zero[1] = {0};
    CHECK(mt_send(c, 0, "u", MT_FLOAT32, shape, 6) == MT_ESTATE);
    CHECK(strcmp(mt_client_error(c), "mt_send before mt_client_start") == 0);
    CHECK(mt_declare_field(c, "time_step", MT_FLOAT32, 2, shape) == MT_EINVAL);
    CHECK(mt_declare_field(c, "", MT_FLOAT32, 2, shape) == MT_EINVAL);
    CHECK(mt_declare_field(c, "bad\xff", MT_FLOAT32, 2, shape) == MT_EINVAL);
    CHECK(mt_declare_field(c, "z", MT_FLOAT32, 1, zero) == MT_EINVAL);
    CHECK(mt_declare_field(c, "n", MT_FLOAT32, 9, shape) == MT_EINVAL);
    CHECK(mt_declare_field(c, "d", (mt_dtype)13, 2, shape) == MT_EINVAL);
    CHECK(mt_client_start(c) == MT_EFIELD); /* no field */
    CHECK(strcmp(mt_client_error(c), "declare at least one field") == 0);
    CHECK(mt_declare_field(c, "u", MT_FLOAT32, 2, shape) == MT_OK);
    CHECK(mt_declare_field(c, "u", MT_FLOAT32, 2, shape) == MT_EFIELD);
    CHECK(mt_set_rank(c, 2, 2) == MT_EINVAL);
    CHECK(mt_set_endpoints(c, "localhost:1") == MT_EINVAL);
    CHECK(mt_set_parameter(c, "p", NAN) == MT_EINVAL);
    CHECK(mt_set_batching(c, 1024, 0) == MT_EINVAL);
    CHECK(mt_declare_part(c, "u", 4, 3) == MT_EINVAL);
    CHECK(mt_set_rank(c, 1, 2) == MT_OK);
    CHECK(mt_set_simulation_id(c, 1) == MT_OK);
    CHECK(mt_set_endpoints(c, "tcp://127.0.0.1:9") == MT_OK);
    CHECK(mt_client_start(c) == MT_EFIELD); /* rank 1 of 2 without a part */
    CHECK(mt_declare_part_count(c, "u", 3) == MT_OK);
    CHECK(mt_client_start(c) == MT_EFIELD); /* offset unknown without MPI */
    CHECK(mt_declare_part(c, "u", 3, 3) == MT_OK);
    CHECK(mt_set_close_timeout(c, 0) == MT_OK);
    CHECK(mt_client_start(c) == MT_OK);
    CHECK(mt_declare_field(c, "v", MT_FLOAT32, 2, shape) == MT_ESTATE);
    CHECK(mt_client_start(c) == MT_ESTATE);
    double v;
    CHECK(mt_client_parameter(c, "nope", &v) == MT_EINVAL);
    /* none at all (no MELISSA_TRAINER_PARAMETERS: started by hand): the fix is named */
    CHECK(strcmp(mt_client_error(c),
                 "no parameter 'nope': this simulation has none: no MELISSA_TRAINER_PARAMETERS "
                 "in its environment (a simulation started by hand?); start it through the "
                 "trainer's launcher, or give them: MELISSA_TRAINER_PARAMETERS='{\"nope\": 0.5}' "
                 "or mt_set_parameter(c, \"nope\", 0.5) before mt_client_start") == 0);
    mt_client_abort(c);
    mt_client_abort(NULL);
    mt_client *s;
    CHECK(mt_client_create(&s) == MT_OK);
    CHECK(mt_declare_field(s, "n1", MT_FLOAT32, 1, NULL) == MT_EINVAL); /* ndim 1: a shape */
    CHECK(mt_declare_field(s, "energy", MT_FLOAT64, 0, NULL) == MT_OK); /* the guide's scalar */
    mt_client_abort(s);
    CHECK(strcmp(mt_strerror(MT_ESHAPE), "MT_ESHAPE: wrong element count") == 0);
}

/* An ADMISSION frame laid out as docs/protocol.md section 17a's table says (little
 * endian), then `extra` bytes: its length. */
static size_t admission_frame(uint8_t *f, uint64_t sim, uint64_t request, uint32_t rank,
                              uint32_t world, int status, const char *reason, size_t extra) {
    size_t n = strlen(reason);
    memset(f, 0, 36 + n + extra);
    memcpy(f, "MTRN", 4);
    f[4] = 2;  /* version */
    f[5] = 12; /* ADMISSION */
    for (int i = 0; i < 8; ++i) f[8 + i] = (uint8_t)(sim >> 8 * i);
    for (int i = 0; i < 8; ++i) f[16 + i] = (uint8_t)(request >> 8 * i);
    for (int i = 0; i < 4; ++i) f[24 + i] = (uint8_t)(rank >> 8 * i);
    for (int i = 0; i < 4; ++i) f[28 + i] = (uint8_t)(world >> 8 * i);
    f[32] = (uint8_t)status;
    f[34] = (uint8_t)n;
    f[35] = (uint8_t)(n >> 8);
    memcpy(f + 36, reason, n);
    for (size_t i = 0; i < extra; ++i) f[36 + n + i] = 0xAB;
    return 36 + n + extra;
}

static void test_admission_parse(void) {
    uint8_t f[256];
    mt_admission a;
    const char *why = "r";
    size_t n = admission_frame(f, 7, 3, 1, 2, MT_ADMISSION_REFUSED, why, 0);
    CHECK(mt_admission_parse(f, n, 7, 3, 1, 2, &a) == NULL);
    CHECK(a.status == MT_ADMISSION_REFUSED && a.reason_len == 1 && a.reason[0] == 'r');
    n = admission_frame(f, 7, 3, 1, 2, MT_ADMISSION_ACCEPTED, "", 0);
    CHECK(mt_admission_parse(f, n, 7, 3, 1, 2, &a) == NULL && a.status == MT_ADMISSION_ACCEPTED);
    n = admission_frame(f, 7, 3, 1, 2, MT_ADMISSION_UNKNOWN, "", 0);
    CHECK(mt_admission_parse(f, n, 7, 3, 1, 2, &a) == NULL && a.status == MT_ADMISSION_UNKNOWN);
    /* tolerated: what a later revision may add without moving what is read */
    n = admission_frame(f, 7, 3, 1, 2, MT_ADMISSION_REFUSED, "why", 12);
    CHECK(mt_admission_parse(f, n, 7, 3, 1, 2, &a) == NULL && a.reason_len == 3);
    f[6] = 1, f[33] = 1; /* flags, the reserved byte */
    CHECK(mt_admission_parse(f, n, 7, 3, 1, 2, &a) == NULL && a.status == MT_ADMISSION_REFUSED);
    /* rejected: what breaks a field read */
    n = admission_frame(f, 7, 3, 1, 2, MT_ADMISSION_REFUSED, "why", 0);
    CHECK(strcmp(mt_admission_parse(f, 35, 7, 3, 1, 2, &a), "truncated") == 0);
    CHECK(strcmp(mt_admission_parse(f, n - 1, 7, 3, 1, 2, &a), "bad_size") == 0);
    CHECK(strcmp(mt_admission_parse(f, n, 7, 4, 1, 2, &a), "bad_request_id") == 0);
    CHECK(strcmp(mt_admission_parse(f, n, 8, 3, 1, 2, &a), "bad_request_id") == 0);
    CHECK(strcmp(mt_admission_parse(f, n, 7, 3, 0, 2, &a), "bad_rank") == 0);
    CHECK(strcmp(mt_admission_parse(f, n, 7, 3, 1, 3, &a), "bad_rank") == 0);
    f[5] = 10; /* HELD */
    CHECK(strcmp(mt_admission_parse(f, n, 7, 3, 1, 2, &a), "bad_kind") == 0);
    f[5] = 12, f[4] = 1;
    CHECK(strcmp(mt_admission_parse(f, n, 7, 3, 1, 2, &a), "bad_version") == 0);
    f[4] = 2, f[0] = 'X';
    CHECK(strcmp(mt_admission_parse(f, n, 7, 3, 1, 2, &a), "bad_magic") == 0);
    f[0] = 'M', f[32] = 3;
    CHECK(strcmp(mt_admission_parse(f, n, 7, 3, 1, 2, &a), "bad_request") == 0);
    f[32] = MT_ADMISSION_ACCEPTED; /* accepted with a reason */
    CHECK(strcmp(mt_admission_parse(f, n, 7, 3, 1, 2, &a), "bad_size") == 0);
    n = admission_frame(f, 7, 3, 1, 2, MT_ADMISSION_REFUSED, "", 0); /* refused without */
    CHECK(strcmp(mt_admission_parse(f, n, 7, 3, 1, 2, &a), "bad_size") == 0);
    n = admission_frame(f, 7, 3, 1, 2, MT_ADMISSION_REFUSED, "\xc3", 0); /* not UTF-8 */
    CHECK(strcmp(mt_admission_parse(f, n, 7, 3, 1, 2, &a), "bad_request") == 0);
}

/* A RECEIPT frame laid out as docs/protocol.md section 17b's table says (little endian:
 * the prefix, request id u64, rank u32, world u32, admission u8, bye u8, reason length
 * u16, steps u64, BYE steps u64, non-finite u64, the reason), then `extra` bytes. */
static size_t receipt_frame(uint8_t *f, uint64_t request, int admission, int bye,
                            const char *reason, uint64_t steps, uint64_t bye_steps,
                            uint64_t nonfinite, size_t extra) {
    size_t n = strlen(reason);
    memset(f, 0, 60 + n + extra);
    memcpy(f, "MTRN", 4);
    f[4] = 2;  /* version */
    f[5] = 14; /* RECEIPT */
    for (int i = 0; i < 8; ++i) f[8 + i] = (uint8_t)((uint64_t)7 >> 8 * i); /* simulation 7 */
    for (int i = 0; i < 8; ++i) f[16 + i] = (uint8_t)(request >> 8 * i);
    f[24] = 1, f[28] = 2; /* rank 1 of 2 */
    f[32] = (uint8_t)admission;
    f[33] = (uint8_t)bye;
    f[34] = (uint8_t)n;
    f[35] = (uint8_t)(n >> 8);
    for (int i = 0; i < 8; ++i) f[36 + i] = (uint8_t)(steps >> 8 * i);
    for (int i = 0; i < 8; ++i) f[44 + i] = (uint8_t)(bye_steps >> 8 * i);
    for (int i = 0; i < 8; ++i) f[52 + i] = (uint8_t)(nonfinite >> 8 * i);
    memcpy(f + 60, reason, n);
    for (size_t i = 0; i < extra; ++i) f[60 + n + i] = 0xAB;
    return 60 + n + extra;
}

static void test_receipt_parse(void) {
    uint8_t f[256];
    mt_receipt r;
    /* (values past one byte: a field read at the wrong offset or width shows) */
    size_t n = receipt_frame(f, 0x0102030405060708u, MT_ADMISSION_ACCEPTED, MT_RECEIPT_BYE, "",
                             0x1000000001u, 0x300, 0x200, 0);
    CHECK(mt_receipt_parse(f, n, 7, 0x0102030405060708u, 1, 2, &r) == NULL);
    CHECK(r.admission == MT_ADMISSION_ACCEPTED && r.bye == MT_RECEIPT_BYE && r.reason_len == 0);
    CHECK(r.steps == 0x1000000001u && r.bye_steps == 0x300 && r.nonfinite == 0x200);
    CHECK(mt_receipt_decides(&r, 0x300) == 1 && mt_receipt_decides(&r, 0x301) == 0);
    n = receipt_frame(f, 3, MT_ADMISSION_ACCEPTED, MT_RECEIPT_FINISHED, "", 5, 0, 5, 0);
    CHECK(mt_receipt_parse(f, n, 7, 3, 1, 2, &r) == NULL && mt_receipt_decides(&r, 9) == 1);
    n = receipt_frame(f, 3, MT_ADMISSION_UNKNOWN, MT_RECEIPT_NO_BYE, "", 0, 0, 0, 0);
    CHECK(mt_receipt_parse(f, n, 7, 3, 1, 2, &r) == NULL && mt_receipt_decides(&r, 0) == 0);
    n = receipt_frame(f, 3, MT_ADMISSION_REFUSED, MT_RECEIPT_BYE, "why", 4, 4, 0, 0);
    CHECK(mt_receipt_parse(f, n, 7, 3, 1, 2, &r) == NULL && mt_receipt_decides(&r, 4) == -1);
    CHECK(r.reason_len == 3 && memcmp(r.reason, "why", 3) == 0);
    /* tolerated, as mt_admission_parse: the flags, bytes after the reason */
    n = receipt_frame(f, 3, MT_ADMISSION_REFUSED, MT_RECEIPT_NO_BYE, "why", 0, 0, 0, 9);
    f[6] = 1;
    CHECK(mt_receipt_parse(f, n, 7, 3, 1, 2, &r) == NULL && r.reason_len == 3);
    /* rejected: what breaks a field read */
    n = receipt_frame(f, 3, MT_ADMISSION_REFUSED, MT_RECEIPT_NO_BYE, "why", 0, 0, 0, 0);
    CHECK(strcmp(mt_receipt_parse(f, 59, 7, 3, 1, 2, &r), "truncated") == 0);
    CHECK(strcmp(mt_receipt_parse(f, n - 1, 7, 3, 1, 2, &r), "bad_size") == 0);
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 4, 1, 2, &r), "bad_request_id") == 0);
    CHECK(strcmp(mt_receipt_parse(f, n, 8, 3, 1, 2, &r), "bad_request_id") == 0);
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 0, 2, &r), "bad_rank") == 0);
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 3, &r), "bad_rank") == 0);
    f[5] = 12; /* ADMISSION */
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_kind") == 0);
    f[5] = 14, f[4] = 1;
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_version") == 0);
    f[4] = 2, f[0] = 'X';
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_magic") == 0);
    f[0] = 'M', f[32] = 3; /* an admission status past 2 */
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_request") == 0);
    f[32] = MT_ADMISSION_ACCEPTED; /* accepted with a reason */
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_size") == 0);
    n = receipt_frame(f, 3, MT_ADMISSION_ACCEPTED, 3, "", 0, 0, 0, 0); /* a BYE status past 2 */
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_request") == 0);
    n = receipt_frame(f, 3, MT_ADMISSION_ACCEPTED, MT_RECEIPT_NO_BYE, "", 4, 4, 0, 0);
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_request") == 0); /* BYE steps */
    n = receipt_frame(f, 3, MT_ADMISSION_ACCEPTED, MT_RECEIPT_FINISHED, "", 4, 4, 0, 0);
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_request") == 0);
    n = receipt_frame(f, 3, MT_ADMISSION_ACCEPTED, MT_RECEIPT_BYE, "", 4, 4, 5, 0);
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_request") == 0); /* 5 of 4 */
    n = receipt_frame(f, 3, MT_ADMISSION_REFUSED, MT_RECEIPT_NO_BYE, "", 0, 0, 0, 0);
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_size") == 0); /* no reason */
    n = receipt_frame(f, 3, MT_ADMISSION_REFUSED, MT_RECEIPT_NO_BYE, "\xc3", 0, 0, 0, 0);
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_request") == 0); /* not UTF-8 */
    f[34] = 0x01, f[35] = 0x10; /* a reason of 4097 bytes */
    CHECK(strcmp(mt_receipt_parse(f, n, 7, 3, 1, 2, &r), "bad_size") == 0);
    /* the query, as the table lays it out */
    uint8_t q[102];
    n = mt_receipt_query(q, 7, 0x0102, 0x0304, 1, 2, "run-a");
    CHECK(n == 43 && memcmp(q, "MTRN\x02\x0d\x00\x00\x07", 9) == 0);
    CHECK(q[16] == 0x02 && q[17] == 0x01 && q[24] == 0x04 && q[25] == 0x03);
    CHECK(q[32] == 1 && q[33] == 0 && q[34] == 2 && q[35] == 0 && q[36] == 5 && q[37] == 0);
    CHECK(memcmp(q + 38, "run-a", 5) == 0);
    CHECK(mt_receipt_query(q, 7, 1, 0, 0, 1, NULL) == 38 && q[36] == 0);
}

int main(void) {
    test_format_double();
    test_json();
    test_json_array();
    test_utf8_and_escape();
    test_stepset();
    test_all_finite();
    test_state_rules();
    test_admission_parse();
    test_receipt_parse();
    return unit_report("all unit tests passed");
}
