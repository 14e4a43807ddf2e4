"""A run's configuration: `TrainingArguments` (arguments), its command-line parser
(parser, like `transformers.HfArgumentParser`; fields, how a field is read from a
string) and the reading of configuration files and values with errors that name each
field (reading).

Imports `common` and the buffers' own configuration only; torch only inside the checks
of the compile options (`compile_options`), when compilation is asked for.
"""
