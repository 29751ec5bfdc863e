"""``vfl board``: one party's runs in a browser, read from its own work directory only.

Layers: :mod:`vfl.board.runs` reads run records (:mod:`vfl.deploy.record`);
:mod:`vfl.board.results`, :mod:`vfl.board.learned` and :mod:`vfl.board.serving` turn
them into page sections; :mod:`vfl.board.charts` draws SVG; :mod:`vfl.board.app` is the
FastAPI application; :mod:`vfl.board.cli` the command.  A face like ``vfl party`` and
``vfl serve``: it imports neither.
"""
