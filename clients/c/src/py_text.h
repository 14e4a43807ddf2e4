/* py_text.h: the texts written as the Python client writes them (a double's
 * repr, a string's repr and strip, UTF-8, a CURVE key's and an endpoint's faults). Not installed;
 * internal.h, which every source includes, includes it at its end, after the types it
 * uses. */
#ifndef MT_PY_TEXT_H
#define MT_PY_TEXT_H

#include "internal.h"

/* The Python repr of a double (shortest round trip: 300.0, 1e-05, 1e+16) into out. */
void mt_format_double(double v, char out[32]);
bool mt_utf8_valid(const char *s, size_t n);
/* Whether `key` is not a 40-character Z85 CURVE key, and then what it must be, into `out`
 * (z85.c; melissa_trainer/client/server_key.py z85_fault, word for word). */
bool mt_z85_fault(const char *key, char *out, size_t size);
/* Python's repr of the UTF-8 string `s` ('...', or "..." when it holds ' and no "; \\,
 * \n, \r, \t and what str.isprintable refuses escaped, as \xhh, \uhhhh or \Uhhhhhhhh; a
 * byte not UTF-8 as \udcXX), in a new string (to free; NULL: no memory): the messages
 * that quote a key as the Python client's do (z85.c). */
char *mt_py_repr(const char *s);
/* Python's str.isprintable of one code point (py_printable.c, generated from Python's
 * unicodedata by clients/c/tools/make_py_printable.py). */
bool mt_py_printable(unsigned long cp);
/* `s` without the leading and trailing white space Python's str.strip takes off (its
 * str.isspace: also \x1c-\x1f, U+0085, the no-break and other Unicode spaces), in a new
 * string (NULL: no memory): a key read from a variable, as the Python client reads it. */
char *mt_py_strip(const char *s);
/* serve_given.c: whether the endpoint `e` (stripped) is not of a form to connect to: 1
 * with *why (to free) saying so in the Python client's words ("endpoint 'tcp://h' has no
 * port: " then `form`, the fix; a quote mark at its start or end, a port not 1 to 65535,
 * the host *; melissa_trainer/client/endpoint_form.py endpoint_fault), 0 (it is; other
 * transports are ZeroMQ's to judge) or -1 (no memory). The receivers' (env.c) and the
 * serving endpoints' (serve_given.c) check. */
int mt_endpoint_fault(const char *e, const char *form, char **why);

#endif
