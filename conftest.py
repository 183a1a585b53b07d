"""pytest collects fastgru's doctests (--doctest-modules); fastgru/dask.py needs the optional dask extra."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("distributed") else ["fastgru/dask.py"]
