"""The one place that names the contract this SDK builds against.

Moving to another `wharf:plugin` version is a change here (and, if componentize-py names
the generated modules differently, in `_wit.py`).
"""

#: The WIT package and version of the contract.
PACKAGE = "wharf:plugin"
VERSION = "0.3.0"

#: The world a resource backend is built for.
BACKEND_WORLD = f"{PACKAGE}/resource-backend@{VERSION}"
#: The world a sandbox provider is built for.
PROVIDER_WORLD = f"{PACKAGE}/sandbox-provider@{VERSION}"

#: The componentize-py release the build command is tested with (installed by the
#: project's `scripts/python-toolchain.sh`).
COMPONENTIZE_PY_VERSION = "0.25.1"
