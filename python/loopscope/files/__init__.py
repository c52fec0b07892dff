"""Files in and out, before any analysis: every path loopscope reads or
writes is checked here first and JSON is read with bounds (_inputs), outside
data is checked against its shape (_schema), a finished profile's raw
records are saved and loaded (_recording, the format of
`prof.save()` and of the demo's bundled recording), and each trace format
loopscope reads is declared once (_formats: registered by the readers, read
by the checks, the views and the CLI).

Floor 1 of the package (tests/house/test_import_graph.py): may import only
loopscope._core and loopscope._version; every floor above may import it."""
