"""Pure domain of fermix-memory: values, memory rows, operations, admission, scopes and events.

Nothing here performs I/O, reads a clock or keeps global state: time and ids come in as
arguments, decisions come out as events.
"""
