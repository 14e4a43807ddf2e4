"""The bottom layer: what every other layer may use and which uses nothing of the package.

* `checks`: checks of counts, durations and directories given to the library (argument
  checks, one message per problem naming the field);
* `json_output`: JSON that people and tools read (a non-finite number as ``null``);
* `json_words`: the words of JSON a reader refuses, as the C client says them;
* `migrations`: every migration of a persisted record, keyed by record and version;
* `refusal`: an error every rank meets said once, by rank 0 (a refused start, a bad
  command-line flag), every rank still exiting non-zero.

Standard library and numpy only: no torch, no pyzmq.
"""
