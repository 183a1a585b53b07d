"""A Sphinx extension that fails the build when a public name of fastgru is missing from the API reference.

The public names are every name of ``fastgru.__all__`` and, for each public submodule, its
``__all__``, or when it has none the functions and classes it defines and its UPPER_CASE constants.
A name is in the reference when the Python domain holds it (``autofunction``, ``autoclass``,
``autodata``, ``automodule`` ...). Each missing name is a warning, which ``-W`` (``tox -e docs``,
``.ci/docs``) turns into an error. ``tests/test_docs.py`` runs ``missing`` on the directives of
docs/api/ as well.
"""

import importlib
import inspect

#: The modules whose public names the reference must hold.
PUBLIC_MODULES = ("fastgru", "fastgru.reference", "fastgru.benchmark", "fastgru.torch", "fastgru.dask")


def public_names(module):
    """The public names of ``module``: its ``__all__``, else what it defines (functions, classes,
    UPPER_CASE constants), imports and private names left out."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    names = []
    for name, value in vars(module).items():
        if name.startswith("_") or inspect.ismodule(value):
            continue
        if inspect.isfunction(value) or inspect.isclass(value):
            if value.__module__ == module.__name__:
                names.append(name)
        elif name.isupper():
            names.append(name)
    return names


def missing(documented, modules=PUBLIC_MODULES):
    """``module.name`` for each public name of ``modules`` that is not in ``documented`` (a set of
    full names: objects and modules of the Python domain)."""
    found = []
    for module_name in modules:
        module = importlib.import_module(module_name)
        for name in public_names(module):
            if f"{module_name}.{name}" not in documented:
                found.append(f"{module_name}.{name}")
    return found


def _check(app, env):
    from sphinx.util import logging  # here, so that the tests import this module without Sphinx

    logger = logging.getLogger(__name__)
    domain = env.get_domain("py")
    documented = set(domain.objects) | set(domain.modules)
    for name in missing(documented):
        logger.warning("public name %s is not in the API reference (docs/api/)", name, type="fastgru", subtype="api")


def setup(app):
    app.connect("env-check-consistency", _check)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
