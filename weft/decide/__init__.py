"""Deciding (docs/design.md section 6): the decision record, the race on thin margins, the
legacy matcher policy. Imports ``weft.cost`` and ``weft.compose``; what it needs of the
lowering and the C compiler (building a race's contenders) is passed in by ``weft.compile``.

- ``record``: the SQLite decision record under ``WEFT_CACHE_DIR`` (``weft record``);
- ``race``: timing two contenders ABBA and judging the result;
- ``verdicts``: the priced policy's pricer behind the record and the race.
"""
