"""The ``trainium`` numerics policy (:mod:`.policy`, the owner of the setting) and how each op follows it
(:mod:`.calls`, by the op's numerics class in the op table). Imports ``device/ops`` and the source-line rule."""
