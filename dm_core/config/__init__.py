"""DM's task and source files, read unchanged (``task.py``, ``source.py``).

``decode.py`` turns YAML into typed records strictly (unknown keys, wrong types, duplicate keys
are problems), ``problems.py`` collects every problem of a file into one error, ``units.py``,
``instances.py`` and ``checks.py`` hold DM's per-section checks and defaults, ``inventory.py``
says what becomes of every key (works / warns / deprecated) and warns for those set in vain.
"""
