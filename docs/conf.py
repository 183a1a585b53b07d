"""Sphinx configuration of fastgru's documentation (docs/contributing.md, "Documentation").

Build: ``tox -e docs``, or ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
"""

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS / "_ext"))

import fastgru  # noqa: E402

project = "fastgru"
author = "fastgru's developers"
copyright = "2026, fastgru's developers"
version = release = fastgru.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc", "numpydoc", "public_api"]
source_suffix = {".md": "markdown", ".rst": "restructuredtext"}
exclude_patterns = ["_build", "_ext", "test_benchmark_candidate.py"]

# Every reference must resolve: a broken link, role or cross-reference is a warning, -W an error.
nitpicky = True
default_role = "py:obj"
# A docstring may name an internal (a leading underscore): internals are not in the reference.
nitpick_ignore_regex = [(r"py:.*", r"(.*\.)?_[A-Za-z].*")]
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]

autodoc_typehints = "none"  # numpydoc's Parameters sections give the types
autodoc_member_order = "bysource"
numpydoc_show_class_members = False
numpydoc_xref_param_type = False

html_theme = "pydata_sphinx_theme"
html_title = f"fastgru {release}"
html_theme_options = {"navigation_with_keys": False, "show_toc_level": 2}
html_show_sourcelink = False
