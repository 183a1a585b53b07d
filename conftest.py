"""pytest collects fastgru's doctests (--doctest-modules); fastgru/dask.py needs the optional dask extra,
fastgru/torch.py needs torch."""

import importlib.util

collect_ignore = [] if importlib.util.find_spec("distributed") else ["fastgru/dask.py"]
if importlib.util.find_spec("torch") is None:
    collect_ignore.append("fastgru/torch.py")
