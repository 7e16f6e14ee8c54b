"""One trace model (issue 29 item 4): the timeline's event record (:mod:`.events`) and its lanes (:mod:`.lanes`),
declared once; the clocks' ring, the Chrome trace, the profiler's merge, the timeline widget and the rank pool's
merged trace all read these two. A leaf of ``device/``: it imports only the source-line rule."""
