"""The simulation id, the parameters and the serving variables read from the
environment are taken or refused alike by the C client (clients/c/src/env.c, serve.c,
json_scan.c) and the Python client (client/config.py ``check_simulation_id``,
client/parameters.py ``check_parameters``; client/predict_endpoint.py), in the same
words: the same values run through both, their verdicts and messages compared.

The rules: ``MELISSA_TRAINER_SIMULATION_ID``, after ``str.strip``, is ASCII digits 0-9
only, below 2**64 (refused naming the variable and its value's repr); a
``MELISSA_TRAINER_PARAMETERS`` that is not JSON says where (Python's json.loads reason, a
position in characters), shows the value and gives an example; each of its values must
be a JSON number, finite; a serving variable blank to ``str.strip`` is unset.

Before (hcpar): Python took ``1_000``, ``+7``, ``-0``, other scripts' digits (``int``) and
C took ``+7`` and ``-0`` but not the others; an id out of range was said in two ways
("simulation id N from ..." in C); C said "expected a string key at character 1" where
Python said "Expecting property name enclosed in double quotes at character 1: '...';
give an object ..." (C: no value, no example, positions in bytes, "1." refused as an
invalid number where Python expects a ','); Python took a parameter "0.5" or true
(``float``) that C refused, and named neither the variable nor, as C did, a JSON null or
array (``None``, ``[1, 2]``); an integer literal past a double's range was Python's raw
OverflowError (C: inf is not finite); a ``MELISSA_TRAINER_SERVE_ENDPOINTS`` or
``MELISSA_TRAINER_RENDEZVOUS`` of Unicode blanks (U+3000, a no-break space) was blank to
Python and a value to C (an endpoint '' refused, a directory waited for). A string of
bytes no UTF-8 decodes was taken by Python (read as lone surrogates: a name no UTF-8
holds) and refused by C ("a string is not valid UTF-8"): both refuse it, in C's words.
(A rendezvous that is no directory: test_c_predict_missing_dir.py.)"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
from c_driver import run_script

from melissa_trainer.client import Client, ClientTuning
from melissa_trainer.client.predict import Predictor

pytestmark = pytest.mark.e2e  # every test here starts a process

MT_EENV = 6
ID, PARAMETERS = "MELISSA_TRAINER_SIMULATION_ID", "MELISSA_TRAINER_PARAMETERS"
SERVE, RENDEZVOUS = "MELISSA_TRAINER_SERVE_ENDPOINTS", "MELISSA_TRAINER_RENDEZVOUS"
OK = "tcp://127.0.0.1:9"  # (nothing listens: a start is taken, its close given no time)
FIELDS = {"u": ((4,), "float32")}
IDS = [
    ("plain", "7"),
    ("zero", "0"),
    ("leading-zeros", "007"),
    ("largest", "18446744073709551615"),
    ("2**64", "18446744073709551616"),
    ("far-too-large", "9" * 30),
    ("many-leading-zeros", "0" * 30 + "5"),
    ("ascii-blanks", " 7\t\n"),
    ("unicode-blanks", "\xa07\u3000"),
    ("separator-blanks", "\x1c7\x1f"),
    ("plus", "+7"),
    ("minus-zero", "-0"),
    ("negative", "-3"),
    ("underscore", "1_000"),
    ("arabic-indic-digit", "\u0663"),
    ("fullwidth-digit", "\uff17"),
    ("superscript-two", "\xb2"),
    ("letters", "x1"),
    ("hex", "0x10"),
    ("exponent", "1e3"),
    ("fraction", "7.0"),
    ("empty", ""),
    ("blank", "   "),
    ("quoted", '"7"'),
    ("apostrophe", "it's"),
    ("inner-blank", "1 2"),
]
NOT_JSON = [
    ("single-quotes", "{'a': 1}"),
    ("no-key", "{oops"),
    ("no-colon", '{"a" 1}'),
    ("no-comma", '{"a": 1 "b": 2}'),
    ("extra-data", '{"a": 1} x'),
    ("no-value", '{"a": }'),
    ("unterminated", '{"a": "x'),
    ("backslash-last", '{"a": "\\'),
    ("control-character", '{"a": "\x01"}'),
    ("bad-escape", '{"a": "\\q"}'),
    ("short-u-escape", '{"a": "\\u12"}'),
    ("bad-u-escape", '{"a": "\\u12zz"}'),
    ("word", "x"),
    ("non-ascii-before", '{"\xe9t\xe9": 1 x}'),
    ("leading-zero", '{"a": 01}'),
    ("bare-fraction-dot", '{"a": 1.}'),
    ("bare-exponent", '{"a": 1e}'),
    ("minus-alone", '{"a": -}'),
    ("bad-word", '{"a": tru}'),
    ("open-brace", "{"),
    ("array-no-value", '{"a": [1,}'),
    ("unicode-space-first", "\u3000{}"),
    ("array", "[1, 2]"),
    ("string", '"x"'),
    ("trailing-comma", '{"a": 1,}'),
    ("trailing-comma-spaced", '{"a": 1 ,\n }'),
    ("trailing-comma-array", '{"a": [1, 2,]}'),
    ("trailing-comma-nested", '{"a": {"b": [{"c": 1,}]}}'),
    ("lone-high-surrogate-name", '{"\\ud800": 1}'),
    ("lone-low-surrogate-name", '{"a": 1, "x\\uDC00y": 2}'),
    ("two-high-surrogates", '{"\\ud800\\ud800": 1}'),
    ("lone-surrogate-value", '{"a": "\\ud800"}'),
    ("lone-surrogate-nested", '{"a": {"\\udfff": 1}}'),
    ("invalid-utf8-name", '{"a": 1, "\udcff": 2}'),
    ("invalid-utf8-value", '{"a": "\udcc3"}'),
    ("invalid-utf8-then-no-colon", '{"\udce9t\udce9" 1}'),
    ("invalid-utf8-after-a-fault", '{"a" 1, "\udcff": 2}'),
    ("invalid-utf8-unterminated", '{"\udcff'),
    ("invalid-utf8-bare", "\udcff"),
    ("taken", ' {"a": 1, "b": -2.5e-3} '),
]
#: (name, MELISSA_TRAINER_PARAMETERS): valid JSON objects, judged value by value
VALUES = [
    ("number", '{"a": 0.5}'),
    ("integer", '{"a": -3}'),
    ("same-name-twice", '{"a": 1, "a": 2}'),
    ("integer-past-a-double", '{"a": ' + "9" * 400 + "}"),
    ("string-of-a-number", '{"a": "0.5"}'),
    ("true", '{"a": true}'),
    ("false", '{"a": false}'),
    ("null", '{"a": null}'),
    ("array", '{"a": [1, 2]}'),
    ("object", '{"a": {"b": 1}}'),
    ("nan", '{"a": NaN}'),
    ("minus-infinity", '{"a": -Infinity}'),
    ("too-large", '{"a": 1e400}'),
    ("quote-in-name", '{"it\'s": "x"}'),
    ("escapes", '{"a\\n": "\\u00e9\\t"}'),
    ("surrogate-pair-name", '{"a": 1, "\\ud83d\\ude00": 2}'),
    ("escaped-backslash-then-u", '{"a": 1, "\\\\ud800": 2}'),
]
#: the Python Predictor's words with the C API's
C_NAMES = [("pass endpoint=", "call mt_set_serve_endpoints")]


@pytest.fixture
def by_hand(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MELISSA_* variable for the Python client (run_script drops them for the C one)."""
    for name in list(os.environ):
        if name.startswith("MELISSA_"):
            monkeypatch.delenv(name)


def python_start() -> tuple[bool, str]:
    """(taken, "id=N" or the error's words) of a Python `Client` from its variables."""
    try:
        client = Client(FIELDS, tuning=ClientTuning(failed_close_timeout=0))
    except ValueError as error:
        return False, str(error)
    client.close(bye=False)
    return True, f"id={client.simulation_id}"


def c_start(script_exe: Path, tmp_path: Path, env: dict[str, str]) -> tuple[bool, str]:
    """(taken, "id=N" or the error's words) of an mt_script started from `env`."""
    got = run_script(script_exe, "field u 1 1 4\nstart\ninfo\nabort\n", tmp_path, env)
    if got[2][0] != 0:
        assert got[2][0] == MT_EENV, got
        return False, got[2][1]
    return True, got[-3][1].split()[0]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [v for _, v in IDS], ids=[n for n, _ in IDS])
def test_the_simulation_id_is_judged_alike(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    value: str,
) -> None:
    env = {ID: value, "MELISSA_TRAINER_ENDPOINTS": OK}
    for name, v in env.items():
        monkeypatch.setenv(name, v)
    assert c_start(script_exe, tmp_path, env) == python_start()


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("value", "verdict"),
    [
        ("\xa0007\u3000", (True, "id=7")),
        (
            "1_000",
            (
                False,
                "MELISSA_TRAINER_SIMULATION_ID='1_000' is not a simulation id: give a whole "
                "number in ASCII digits 0-9, e.g. MELISSA_TRAINER_SIMULATION_ID=42",
            ),
        ),
        ("-0", (False, "MELISSA_TRAINER_SIMULATION_ID='-0' is not a simulation id: give")),
        ("+7", (False, "MELISSA_TRAINER_SIMULATION_ID='+7' is not a simulation id: give")),
        (
            " 18446744073709551616",
            (False, "MELISSA_TRAINER_SIMULATION_ID=' 18446744073709551616' is out of range"),
        ),
    ],
)
def test_the_rule_of_the_simulation_id(
    script_exe: Path,
    tmp_path: Path,
    value: str,
    verdict: tuple[bool, str],
) -> None:
    """What both say (the parity above holds them together): ASCII digits only."""
    taken, words = c_start(script_exe, tmp_path, {ID: value, "MELISSA_TRAINER_ENDPOINTS": OK})
    assert taken == verdict[0] and words.startswith(verdict[1]), words


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [v for _, v in NOT_JSON], ids=[n for n, _ in NOT_JSON])
def test_the_parameters_are_judged_alike(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    value: str,
) -> None:
    env = {ID: "3", "MELISSA_TRAINER_ENDPOINTS": OK, PARAMETERS: value}
    for name, v in env.items():
        monkeypatch.setenv(name, v)
    python = python_start()
    assert c_start(script_exe, tmp_path, env) == python
    assert python[0] == (value == NOT_JSON[-1][1]), python


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [v for _, v in VALUES], ids=[n for n, _ in VALUES])
def test_the_parameters_values_are_judged_alike(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    value: str,
) -> None:
    """(a parameter ``a`` taken: its value as both read it)"""
    env = {ID: "3", "MELISSA_TRAINER_ENDPOINTS": OK, PARAMETERS: value}
    for name, v in env.items():
        monkeypatch.setenv(name, v)
    try:
        client = Client(FIELDS, tuning=ClientTuning(failed_close_timeout=0))
    except ValueError as error:
        python = (False, str(error))
    else:
        client.close(bye=False)
        python = (True, f"{client.parameters['a']:.17g}")
    got = run_script(script_exe, "field u 1 1 4\nstart\nget a\nabort\n", tmp_path, env)
    c = (False, got[2][1]) if got[2][0] != 0 else (True, got[-3][1])
    assert c == python


@pytest.mark.timeout(60)
def test_what_both_say_of_parameters_not_json(script_exe: Path, tmp_path: Path) -> None:
    env = {ID: "3", "MELISSA_TRAINER_ENDPOINTS": OK, PARAMETERS: '{"\xe9": 1.}'}
    assert c_start(script_exe, tmp_path, env) == (
        False,
        "MELISSA_TRAINER_PARAMETERS is not valid JSON (Expecting ',' delimiter at character "
        "7): '{\"\xe9\": 1.}'; give an object of name -> number, e.g. '{\"k\": 0.5}'",
    )


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("value", "why"),
    [
        ('{"a": 1, }', "Illegal trailing comma before end of object at character 7"),
        ('{"a": [1,\t]}', "Illegal trailing comma before end of array at character 8"),
    ],
)
def test_a_trailing_comma_is_said_in_python_3_13s_words(
    script_exe: Path, tmp_path: Path, value: str, why: str
) -> None:
    """Whichever Python runs (3.10-3.12 said "Expecting property name enclosed in double
    quotes" or "Expecting value" at the bracket; C said those): both say 3.13's."""
    env = {ID: "3", "MELISSA_TRAINER_ENDPOINTS": OK, PARAMETERS: value}
    assert c_start(script_exe, tmp_path, env) == (
        False,
        f"MELISSA_TRAINER_PARAMETERS is not valid JSON ({why}): {value!r}; give an object of "
        "name -> number, e.g. '{\"k\": 0.5}'",
    )


@pytest.mark.timeout(60)
def test_bytes_no_utf8_decodes_are_refused_in_cs_words(script_exe: Path, tmp_path: Path) -> None:
    """A name or string value of bytes no UTF-8 decodes (Python reads them as lone
    surrogates, surrogateescape): Python took them (a name no UTF-8 holds, as the HELLO
    sends it), C refused "a string is not valid UTF-8" after the string: both do now."""
    value = '{"a": 1, "\udcff": 2}'
    env = {ID: "3", "MELISSA_TRAINER_ENDPOINTS": OK, PARAMETERS: value}
    assert c_start(script_exe, tmp_path, env) == (
        False,
        "MELISSA_TRAINER_PARAMETERS is not valid JSON (a string is not valid UTF-8 at "
        f"character 12): {value!r}; give an object of name -> number, e.g. '{{\"k\": 0.5}}'",
    )


@pytest.mark.timeout(60)
def test_a_lone_surrogate_is_refused_where_it_is_written(script_exe: Path, tmp_path: Path) -> None:
    """Python took '\\ud800' as a name (no UTF-8 holds it: printing it fails; the HELLO
    sent it escaped), C read it as U+FFFD (its HELLO sent "\\ufffd"), and a string
    value's repr differed ('\\ud800' and '\\ufffd'): both refuse it now, in these words."""
    value = '{"\xe9": 1, "b\\uD800": 2}'
    env = {ID: "3", "MELISSA_TRAINER_ENDPOINTS": OK, PARAMETERS: value}
    assert c_start(script_exe, tmp_path, env) == (
        False,
        "MELISSA_TRAINER_PARAMETERS has a lone UTF-16 surrogate (\\uD800 at character 11), "
        'which is no character: \'{"\xe9": 1, "b\\\\uD800": 2}\'; give an object of '
        "name -> number, e.g. '{\"k\": 0.5}'",
    )


def python_request(sim: int) -> str:
    """The Python `Predictor`'s error at a request (its variables set), in C's names."""
    predictor = Predictor(sim)
    try:
        with pytest.raises((ValueError, TimeoutError)) as error:
            predictor.predict({"u": np.zeros(4, np.float32)}, timeout=1)
    finally:
        predictor.close()
    words = str(error.value)
    for python, c in C_NAMES:
        words = words.replace(python, c)
    return words


#: the stream's endpoint (nothing listens: the start succeeds), then a request (line 7)
ASK = f"id 1\nendpoints {OK}\nfield x 1 1 3\nstart\ninput u 1 1 4 : 1 2 3 4\noutput y 1 4\n"


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    "env",
    [
        {SERVE: "\u3000\xa0"},
        {SERVE: "\x1c\x85"},
        {RENDEZVOUS: "\u2028 \u3000"},
        {SERVE: "\u3000", RENDEZVOUS: "\xa0"},
        {SERVE: f"\u3000{OK}, tcp://host\xa0"},
    ],
    ids=["serve-blank", "serve-separators", "rendezvous-blank", "both-blank", "serve-wrapped"],
)
def test_a_serving_variable_blank_to_python_is_unset_to_c(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    env: dict[str, str],
) -> None:
    for name, v in env.items():
        monkeypatch.setenv(name, v)
    got = run_script(script_exe, f"{ASK}predict 1\nabort\n", tmp_path, env)
    assert got[7][1] == python_request(1), got


@pytest.mark.timeout(60)
def test_a_rendezvous_wrapped_in_unicode_blanks_is_the_directory(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
) -> None:
    """(no serve file there: both wait the request's second and say so in the same
    words, its figure included: Python's said no figure; a timeout=1 says 1.0 as C's)"""
    env = {RENDEZVOUS: f"\u3000{tmp_path}\xa0"}
    monkeypatch.setenv(RENDEZVOUS, env[RENDEZVOUS])
    got = run_script(script_exe, f"{ASK}predict 1\nabort\n", tmp_path, env)
    assert got[7][1].startswith(f"no serving endpoint in '{tmp_path}' within 1.0 s: "), got
    assert python_request(1) == got[7][1], got


ATTEMPTS = [
    ("zero", "0"),
    ("three", "3"),
    ("ascii-blanks", " 2\t\n"),
    ("leading-zeros", "0" * 30 + "1"),
    ("largest", "2147483647"),
    ("empty", ""),
    ("blank", "   "),
    ("unicode-blank", "\u3000"),
    ("2**31", "2147483648"),
    ("far-too-large", "9" * 30),
    ("letters", "abc"),
    ("negative", "-1"),
    ("plus", "+1"),
    ("fraction", "1.0"),
    ("underscore", "1_0"),
    ("arabic-indic-digit", "\u0663"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [v for _, v in ATTEMPTS], ids=[n for n, _ in ATTEMPTS])
def test_the_attempt_is_judged_alike_and_a_mistyped_one_refused(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    value: str,
) -> None:
    """MELISSA_TRAINER_ATTEMPT (the launcher's count of launches) that is no attempt
    number is refused at the start in the same words. Before: both clients took any
    value; a mistyped one was read as "not a rerun" (every step sent again) where the
    rerun code read it, and as "launched" where the replay window's did."""
    env = {ID: "7", "MELISSA_TRAINER_ATTEMPT": value, "MELISSA_TRAINER_ENDPOINTS": OK}
    for name, v in env.items():
        monkeypatch.setenv(name, v)
    got = python_start()
    assert c_start(script_exe, tmp_path, env) == got
    digits = value.strip()
    number = digits.isascii() and digits.isdigit() and int(digits) < 2**31
    assert got[0] == (number or not digits), got
    if not got[0]:
        assert got[1].startswith(f"MELISSA_TRAINER_ATTEMPT={value!r} is not an attempt number")


SILENCES = [
    ("whole", "6"),
    ("fraction", "0.25"),
    ("ascii-blanks", " 120\t\n"),
    ("nine-and-nine", "123456789.123456789"),
    ("empty", ""),
    ("blank", "   "),
    ("unicode-blank", "\u3000"),
    ("zero", "0"),
    ("zero-fraction", "0.000"),
    ("ten-digits", "1234567890"),
    ("trailing-dot", "1."),
    ("leading-dot", ".5"),
    ("exponent", "1e3"),
    ("negative", "-1"),
    ("plus", "+1"),
    ("comma", "1,5"),
    ("inf", "inf"),
    ("arabic-indic-digit", "\u0663"),
]


@pytest.mark.timeout(60)
@pytest.mark.parametrize("value", [v for _, v in SILENCES], ids=[n for n, _ in SILENCES])
def test_the_silence_bound_is_judged_alike_and_a_mistyped_one_refused(
    script_exe: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    by_hand: None,
    value: str,
) -> None:
    """MELISSA_TRAINER_SILENCE_S (the launcher's shortest silence bound, which a rerun
    paces its sign of life by: client/launched_env.py, clients/c/src/rerun.c) that is no
    number of seconds is refused at the start in the same words by both clients."""
    env = {ID: "7", "MELISSA_TRAINER_SILENCE_S": value, "MELISSA_TRAINER_ENDPOINTS": OK}
    for name, v in env.items():
        monkeypatch.setenv(name, v)
    got = python_start()
    assert c_start(script_exe, tmp_path, env) == got
    text = value.strip()
    whole, dot, fraction = text.partition(".")
    parts = (whole, fraction) if dot else (whole,)
    form = all(0 < len(p) <= 9 and p.isascii() and p.isdigit() for p in parts)
    assert got[0] == (not text or (form and float(text) > 0)), got
    if not got[0]:
        assert got[1].startswith(f"MELISSA_TRAINER_SILENCE_S={value!r} is not a number of sec")
