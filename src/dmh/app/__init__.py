"""The photo-search application built on the library: what ``dmh build``, ``add``, ``remove``,
``caption`` and ``serve`` run, and the scale-out parts (``--ray``, ``--store milvus``) that
``dmh encode`` / ``index`` / ``search`` share with them.

* :mod:`dmh.app.collection`: a folder of photos and captions made searchable (build, add, remove,
  search, ``--method auto``)
* :mod:`dmh.app.server`: ``dmh serve``, the search page and its JSON API
* :mod:`dmh.app.store`: where a collection keeps its codes (a local index, or Milvus)
* :mod:`dmh.app.distributed`: image features and hash codes as Ray Data stages
* :mod:`dmh.app.rerank`: re-ranking Hamming candidates by the real values behind the codes

The library below it (``dmh``: methods, data, features, metrics, the Hamming index and code files)
never imports from here. Importing this package imports none of its modules.
"""
