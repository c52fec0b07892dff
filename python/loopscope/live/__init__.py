"""What a running profile needs from the process, below the Profile itself:
which CUPTI library to load (_cupti_paths), the one profile a process runs
at a time and its start and stop in the C core (_session), every option's
default and range (_options, for the with-block and the core alike), the
process's settings (_settings), `loopscope.prepare()` (_prepare), and the
hooks a profile puts into the user's model: steps from a module's calls
(_module_steps) and a range per submodule call (_instrument).

Floor 1 (tests/house/test_import_graph.py): just above the C core; imports
only the core and its own modules, so the model, the readers, the watch and
the CLI above it can all use it."""
