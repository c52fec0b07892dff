"""Views of a finished summary and its model, one file per output: the text
report (_report, with _trace_info's lines about a trace file), the notebook
HTML (_html) and its pictures (_pictures), the HTML as a page of its own
(_html_file), and the Chrome / Perfetto trace (_trace_export).  A view only
reads the model and the summary; it derives no gap, step or attribution.

Floor 4 (tests/house/test_import_graph.py): may import distributed/, figures/,
files/, _core and _version; the model and the session at the top of the
package (loopscope._summary, loopscope._profile) offer these views as
methods."""
