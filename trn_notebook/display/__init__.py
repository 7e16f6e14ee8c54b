"""How figures are shown: one formatter, the result objects the magics display, the widgets' static HTML.

- :mod:`.format`: every figure's string (``fmt_s``, ``fmt_bytes``, ``fmt_ms``, ``fmt_share``, ...), the stage
  and label names; the widgets' JavaScript and the JupyterLab extension show strings formatted here.
- :mod:`.results`: ``Table``, ``Card``, ``Message``, ``Sections``, ``Preformatted`` (HTML and plain text).
- :mod:`.fallback`: the widgets' static HTML fallbacks (escaped tables, sections, inline SVG charts).

A leaf package: it imports nothing else from trn_notebook, so every layer (the device included) may use it.
"""
